/**
 * Shared set-up for the local backend's tests: real processes, real files, a temp state dir
 * per test, and a clean-up that kills every supervisor and job group the test left behind.
 */

import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { createLocalBackend } from "../../src/adapters/backend-local/backend.ts";
import type {
  LocalBackend,
  LocalBackendOptions,
} from "../../src/adapters/backend-local/backend-options.ts";
import {
  groupMayBeOurs,
  isAlive,
  readBootId,
  readProcStat,
} from "../../src/adapters/backend-local/proc.ts";
import { plainWrapper } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { type StateLayout, stateLayout } from "../../src/core/layout.ts";
import {
  externalHandle,
  mintSubmissionToken,
  type SubmissionToken,
} from "../../src/core/models.ts";
import type {
  AllocationBackend,
  AllocationObservation,
  ObservationTarget,
  SubmitRequest,
} from "../../src/core/ports/allocation-backend.ts";
import { systemClock } from "../../src/lib/clock.ts";
import type { FaultPoints } from "../../src/lib/fault-point.ts";
import { silentLog } from "../../src/lib/log.ts";
import { selfCommand } from "../../src/lib/self-command.ts";
import { eventually } from "./eventually.ts";
import { makeTempDir } from "./temp-dir.ts";

const BOOT_ID = readBootId();

export const DAEMON_SECRET_NAME = "O4S_TEST_DAEMON_SECRET";

export interface TestState {
  /** The private state dir; its default spool is the sibling `root-spool`. */
  readonly root: string;
  /** A directory beside both, for the test's own files (markers a job writes unsandboxed). */
  readonly scratch: string;
  readonly layout: StateLayout;
  readonly backendDir: string;
}

const created: string[] = [];

export function makeState(): TestState {
  // The state dir one level down, so its sibling spool is removed with the temp dir.
  const base = makeTempDir("o4s-local-");
  const root = join(base, "state");
  const scratch = join(base, "scratch");
  mkdirSync(root, { mode: 0o700 });
  mkdirSync(scratch, { mode: 0o700 });
  created.push(root);
  const layout = stateLayout(root);
  // The daemon makes the spool at start; backends reach everything below it from there.
  mkdirSync(layout.spool, { mode: 0o711 });
  return { root, scratch, layout, backendDir: layout.backendDir("local") };
}

export function backendOptions(
  state: TestState,
  overrides: Partial<LocalBackendOptions> = {},
): LocalBackendOptions {
  return {
    backendDir: state.backendDir,
    spoolDir: state.layout.spool,
    selfCommand: selfCommand(),
    clock: systemClock,
    log: silentLog,
    hostEnv: {
      PATH: process.env["PATH"],
      HOME: process.env["HOME"],
      LANG: "C.UTF-8",
      [DAEMON_SECRET_NAME]: "must-not-reach-jobs",
    },
    killGraceMs: 500,
    // The daemon's composition hands the backend this (session-isolation.ts).
    plainLaunch: plainWrapper(fixedIdentities(null)),
    ...overrides,
  };
}

export function makeBackend(
  state: TestState,
  overrides: Partial<LocalBackendOptions> = {},
): LocalBackend {
  return createLocalBackend(backendOptions(state, overrides));
}

export function newToken(): SubmissionToken {
  return mintSubmissionToken((n) => randomBytes(n));
}

export function makeRequest(
  state: TestState,
  command: readonly string[],
  overrides: Partial<SubmitRequest> = {},
): SubmitRequest {
  const workloadId = `w-${randomBytes(4).toString("hex")}`;
  const allocationId = `a-${randomBytes(4).toString("hex")}`;
  return {
    allocationId,
    workloadId,
    workloadKind: "BATCH",
    token: newToken(),
    epoch: 1,
    profile: "default",
    name: "test",
    launch: { kind: "COMMAND", command, env: {} },
    timeLimitSeconds: null,
    allocationDir: state.layout.allocationDir(workloadId, allocationId),
    workspaceDir: state.layout.workspaceDir(workloadId),
    ...overrides,
  };
}

export function targetOf(request: SubmitRequest): ObservationTarget {
  return {
    allocationId: request.allocationId,
    token: request.token,
    handle: externalHandle(request.token),
  };
}

export async function observeOne(
  backend: AllocationBackend,
  request: SubmitRequest,
): Promise<AllocationObservation> {
  const result = await backend.observe([targetOf(request)]);
  if (result.kind !== "Observed") throw new Error(`backend unavailable: ${result.message}`);
  const observation = result.observations.get(request.allocationId);
  if (observation === undefined) throw new Error("no observation for the target");
  return observation;
}

export function phaseOf(observation: AllocationObservation): string {
  return observation.kind === "Observed" ? observation.phase : "INDETERMINATE";
}

/** Polls `read` until `done` holds, or fails with the last value after `timeoutMs`. */
export async function waitFor<T>(
  read: () => Promise<T> | T,
  done: (value: T) => boolean,
  timeoutMs = 20_000,
  intervalMs = 40,
): Promise<T> {
  let last: T | undefined;
  const holds = async () => {
    last = await read();
    return done(last);
  };
  try {
    await eventually(holds, { timeoutMs, intervalMs });
  } catch {
    throw new Error(`condition not reached in ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
  }
  return last as T;
}

export async function waitForPhase(
  backend: AllocationBackend,
  request: SubmitRequest,
  phases: readonly string[],
  timeoutMs = 20_000,
): Promise<AllocationObservation> {
  return waitFor(
    () => observeOne(backend, request),
    (o) => phases.includes(phaseOf(o)),
    timeoutMs,
  );
}

/** Alive = has a /proc entry that is not a zombie (PID 1 here does not reap orphans). */
export function processAlive(pid: number): boolean {
  const stat = readProcStat(pid);
  return stat !== null && stat.state !== "Z" && stat.state !== "X";
}

export function jobFile(state: TestState, token: string, name: string): string {
  return join(state.backendDir, "jobs", token, name);
}

export function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
}

export function lines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.length > 0);
}

/** A fault point that throws instead of killing: the submit stops there, like a crash. */
export class SimulatedCrash extends Error {
  override readonly name = "SimulatedCrash";
}
export function crashAt(point: string): FaultPoints {
  return {
    hit(p) {
      if (p === point) throw new SimulatedCrash(p);
    },
  };
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** A job array's element groups (elements.jsonl start lines), this incarnation's only. */
function killElementGroups(dir: string): void {
  for (const line of lines(join(dir, "elements.jsonl"))) {
    let start: Record<string, unknown> | undefined;
    try {
      start = (JSON.parse(line) as { start?: Record<string, unknown> }).start;
    } catch {
      continue; // a line cut short
    }
    const pid = Number(start?.["pid"]);
    if (start === undefined || !Number.isInteger(pid) || pid <= 1) continue;
    const identity = { pid, startTicks: String(start["startTicks"]), bootId: BOOT_ID };
    if (groupMayBeOurs(identity, BOOT_ID)) killQuietly(-pid, "SIGKILL");
  }
}

/** Kills every supervisor and job group recorded under the state dirs, then removes them. */
export function cleanUpStates(): void {
  for (const root of created.splice(0)) {
    const jobs = join(root, "backends", "local", "jobs");
    if (existsSync(jobs)) {
      for (const token of readdirSync(jobs)) {
        for (const name of ["job.json", "claim.json"]) {
          const path = join(jobs, token, name);
          if (!existsSync(path)) continue;
          const data = readJson(path);
          const pid = Number(data["pid"]);
          if (!Number.isInteger(pid) || pid <= 1) continue; // a withdrawn claim has no pid
          const identity = { pid, startTicks: String(data["startTicks"]), bootId: BOOT_ID };
          // Only the incarnation this test started: a reused PID belongs to someone else.
          if (name === "job.json" && groupMayBeOurs(identity, BOOT_ID))
            killQuietly(-pid, "SIGKILL");
          if (name === "claim.json" && isAlive(identity, BOOT_ID)) killQuietly(pid, "SIGKILL");
        }
        killElementGroups(join(jobs, token));
      }
    }
    rmSync(dirname(root), { recursive: true, force: true });
  }
}
