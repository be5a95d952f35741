/**
 * The supervisors the backend starts, one per job (`openai4s __supervise`, detached), and
 * the one read of a record everything else goes through (`look`), which moves an unclaimed
 * record forward (starts its supervisor, or withdraws it) and stops a job whose supervisor
 * is gone.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { type JobSnapshot, readJobSnapshot } from "./job-state.ts";
import type { LocalContext, Looked } from "./local-context.ts";
import { groupMayBeOurs, signalGroup } from "./proc.ts";
import { withdraw } from "./record-store.ts";
import { JOB_FILES, type JobStart, jobDir } from "./records.ts";

export function startSupervisor(ctx: LocalContext, token: string, dir: string): void {
  ctx.count("spawnSupervisor");
  const logFd = openSync(join(dir, JOB_FILES.supervisorLog), "a", 0o600);
  try {
    const proc = Bun.spawn([...ctx.selfCommand, "__supervise", "--job-dir", dir], {
      cwd: dir,
      env: { ...ctx.baseEnv },
      // A file, never a pipe: the daemon may die, and a supervisor writing into a closed
      // pipe would die with it.
      stdio: ["ignore", logFd, logFd],
      // Its own session: a signal to the daemon's group (Ctrl-C, kill -9 of a service
      // group) does not reach it.
      detached: true,
    });
    proc.unref();
    ctx.launching.set(token, proc);
  } finally {
    closeSync(logFd);
  }
}

/**
 * Moves an unclaimed record forward: a cancel withdraws it; a supervisor this process
 * started that died without claiming fails it (or the next look would start another,
 * forever); no supervisor in sight starts one.
 */
export function settleUnclaimed(
  ctx: LocalContext,
  token: string,
  dir: string,
  snapshot: Extract<JobSnapshot, { kind: "Unclaimed" }>,
): JobSnapshot {
  if (snapshot.cancel !== null) {
    withdraw(ctx, dir, "CANCELLED", "cancelled before it started");
    return readJobSnapshot(dir, ctx.bootId);
  }
  const proc = ctx.launching.get(token);
  if (proc === undefined) {
    startSupervisor(ctx, token, dir);
    return snapshot;
  }
  if (proc.exitCode === null && proc.signalCode === null) return snapshot;
  ctx.launching.delete(token);
  withdraw(
    ctx,
    dir,
    "SUPERVISOR_FAILED",
    `the job's supervisor exited (${proc.signalCode ?? `code ${proc.exitCode}`}) before starting it: ${tail(join(dir, JOB_FILES.supervisorLog))}`,
  );
  return readJobSnapshot(dir, ctx.bootId);
}

/**
 * A LOST job may still be running unsupervised; stop it so a new attempt is alone. For an
 * array: every element that started and has no end of its own.
 */
export function stopOrphan(
  ctx: LocalContext,
  snapshot: Extract<JobSnapshot, { kind: "Claimed" }>,
): void {
  const groups: JobStart[] = [];
  if (snapshot.job !== null) groups.push(snapshot.job);
  for (const element of snapshot.elements?.values() ?? []) {
    if (element.start !== null && element.exit === null) groups.push(element.start);
  }
  for (const job of groups) {
    if (!groupMayBeOurs(job, ctx.bootId) || !signalGroup(job.pid, "SIGKILL")) continue;
    ctx.count("signal");
    ctx.log.warn("killed the process group of a job whose supervisor is gone", {
      token: snapshot.record.token,
      group: job.pid,
    });
  }
}

/** One read of one record; `settle` lets it start or withdraw a pending launch. */
export function look(ctx: LocalContext, token: string, settle: boolean): Looked {
  const dir = jobDir(ctx.backendDir, token);
  let snapshot = readJobSnapshot(dir, ctx.bootId, ctx.elementsCache);
  if (snapshot.kind === "Unclaimed" && settle)
    snapshot = settleUnclaimed(ctx, token, dir, snapshot);
  if (snapshot.kind === "Absent") return { kind: "Absent" };
  if (snapshot.kind !== "Unclaimed") ctx.launching.delete(token);
  if (snapshot.kind === "Claimed" && snapshot.exit === null && !snapshot.supervisorAlive) {
    stopOrphan(ctx, snapshot);
  }
  return { kind: "Present", snapshot };
}

/** The last few hundred bytes of a log, for a message that explains a failure. */
function tail(path: string, maxBytes = 600): string {
  try {
    const fd = openSync(path, "r");
    try {
      const size = statSync(path).size;
      const length = Math.min(size, maxBytes);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      const text = buffer.toString("utf8").trim();
      return text.length === 0 ? "(no output)" : text;
    } finally {
      closeSync(fd);
    }
  } catch {
    return "(no supervisor log)";
  }
}
