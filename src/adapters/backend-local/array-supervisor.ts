/**
 * A job array under its one supervisor: elements 0..N-1 of the record's launch, each its own
 * process group in its own cgroup with the job's limits and time limit, told its index in
 * OPENAI4S_ARRAY_INDEX, logging to `stdout.log.K`, at most `maxConcurrent` at once. Every
 * element's start and end is appended to elements.jsonl before the next step, and the
 * array's exit.json is written once all have ended.
 *
 * One supervisor, claimed once (link(2)) like a single job's: a daemon restart neither stops
 * it nor starts a second, so no element is lost or run twice. A cancel (or any stop signal)
 * stops the running elements and starts no more; those never started end CANCELLED.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ARRAY_INDEX_ENV } from "../../core/array/array-env.ts";
import {
  elementLimits,
  elementLogPath,
  type LineWriter,
  readElements,
  recordElementExit,
  recordElementStart,
  reserveElementRoom,
} from "./array-records.ts";
import { limitArgv } from "./job-limits.ts";
import { keepTrying, RETRY_SLEEP, writeKept } from "./kept-records.ts";
import { type ExitRecord, JOB_FILES, type JobRecord } from "./records.ts";
import type { StopReason, SupervisedRun, SupervisorDeps } from "./supervisor.ts";

type InstallStop = (onStop: (reason: StopReason) => void) => void;
type RunOne = (run: SupervisedRun, setOnStop: InstallStop) => Promise<unknown>;

/** Element `index` of the array: the record's launch under its own limits and log names. */
export function elementRun(
  dir: string,
  record: JobRecord,
  index: number,
  stopRequested: () => boolean,
  writer?: LineWriter,
): SupervisedRun {
  const limits = elementLimits(record.limits, index);
  return {
    record: {
      ...record,
      argv: [...limitArgv(limits, record.argv)],
      ...(limits === undefined ? {} : { limits }),
      stdoutPath: elementLogPath(record.stdoutPath, index),
      stderrPath: elementLogPath(record.stderrPath, index),
    },
    extraEnv: { [ARRAY_INDEX_ENV]: String(index) },
    cancelRequested: stopRequested,
    started: (start) => recordElementStart(dir, index, start, writer),
    ended: (exit) => recordElementExit(dir, index, exit, writer),
  };
}

export async function superviseArray(
  dir: string,
  record: JobRecord,
  deps: SupervisorDeps,
  setOnStop: InstallStop,
  runOne: RunOne,
): Promise<number> {
  const array = record.array;
  if (array === undefined) throw new Error("superviseArray needs an array record");
  const stops = new Map<number, (reason: StopReason) => void>();
  const state: { stopping: StopReason | null } = { stopping: null };
  setOnStop((reason) => {
    if (state.stopping !== null) return;
    state.stopping = reason;
    deps.log.info("stopping the array's running elements", { reason, running: stops.size });
    for (const stop of stops.values()) stop(reason);
  });
  const stopRequested = () => state.stopping !== null || existsSync(join(dir, JOB_FILES.cancel));
  // Each element's lines are kept as a single job's records are (kept-records.ts): on a full
  // state dir an element that ran must not read as never started, nor the array as LOST.
  const kept: LineWriter = (d, write) =>
    keepTrying(d, join(d, JOB_FILES.elements), write, deps.log, RETRY_SLEEP);
  // Only this supervisor ever writes the log (its claim is exclusive); an element it names
  // is never started again all the same.
  const known = readElements(dir, array.size);
  const room = reserveElementRoom(dir, array.size);
  if (room.kind === "Failed") {
    // A filesystem without fallocate: the lines are still written and retried until they
    // land, only without room of their own on a full disk.
    deps.log.warn("cannot reserve room for the elements' records", { detail: room.message });
  }
  const running = new Set<Promise<unknown>>();
  let startedAt: number | null = null;
  for (let index = 0; index < array.size; index += 1) {
    if (known.has(index)) continue;
    while (running.size >= array.maxConcurrent) await Promise.race(running);
    if (stopRequested()) break;
    startedAt ??= deps.now();
    const run = elementRun(dir, record, index, stopRequested, kept);
    const done: Promise<unknown> = runOne(run, (install) => stops.set(index, install)).finally(
      () => {
        stops.delete(index);
        running.delete(done);
      },
    );
    running.add(done);
  }
  await Promise.all(running);
  const reason: StopReason = state.stopping === "TERMINATED" ? "TERMINATED" : "CANCELLED";
  const ended = readElements(dir, array.size);
  for (let index = 0; index < array.size; index += 1) {
    const element = ended.get(index);
    if (element !== undefined && element.exit !== null) continue;
    recordElementExit(
      dir,
      index,
      {
        reason,
        exitCode: null,
        signal: null,
        message: "cancelled before it started",
        startedAt: null,
        endedAt: deps.now(),
      },
      kept,
    );
  }
  writeArrayExit(dir, deps, startedAt, state.stopping);
  deps.log.info("array ended", { size: array.size, stopped: state.stopping });
  return 0;
}

/** The array's own end: every element has its record; observers read those. */
function writeArrayExit(
  dir: string,
  deps: SupervisorDeps,
  startedAt: number | null,
  stopping: StopReason | null,
): void {
  const exit: ExitRecord = {
    reason: stopping ?? "EXITED",
    exitCode: null,
    signal: null,
    message: stopping === null ? "every element ended" : "stopped; every element ended",
    startedAt,
    endedAt: deps.now(),
  };
  writeKept(dir, join(dir, JOB_FILES.exit), JSON.stringify(exit), deps.log, RETRY_SLEEP);
}
