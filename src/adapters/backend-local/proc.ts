/**
 * Process identity from /proc. A PID alone is not an identity: after the supervisor dies its
 * PID can be handed to an unrelated process, and "a process with that PID exists" would then
 * keep a dead job RUNNING forever. The start time (field 22 of /proc/PID/stat, clock ticks
 * since boot) plus the boot id pins one incarnation. A zombie still has a /proc entry (and
 * on a machine whose PID 1 does not reap, it keeps it forever), so state Z counts as dead.
 */
import { readFileSync } from "node:fs";
import { errorCode } from "../../lib/durable-fs.ts";

export interface ProcStat {
  readonly pid: number;
  /** Field 3: R, S, D, Z, T, X, ... */
  readonly state: string;
  /** Field 5. */
  readonly processGroup: number;
  /** Field 6. */
  readonly session: number;
  /** Field 22: start time in clock ticks since boot. */
  readonly startTicks: string;
}

/** An incarnation of a process: PID + start time + boot. */
export interface ProcessIdentity {
  readonly pid: number;
  readonly startTicks: string;
  readonly bootId: string;
}

/**
 * Parses one /proc/PID/stat line. The command name (field 2) is in parentheses and may itself
 * contain spaces and ")" — the fields after it start after the LAST ")".
 */
export function parseProcStat(text: string): ProcStat | null {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) return null;
  const pid = Number(text.slice(0, open).trim());
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  // rest[0] is field 3; field N is rest[N - 3].
  const state = rest[0];
  const processGroup = Number(rest[2]);
  const session = Number(rest[3]);
  const startTicks = rest[19];
  if (!Number.isInteger(pid) || pid <= 0 || state === undefined || startTicks === undefined) {
    return null;
  }
  if (!/^\d+$/.test(startTicks) || !Number.isInteger(processGroup)) return null;
  return { pid, state, processGroup, session, startTicks };
}

/** The stat of a live-or-zombie process, or null when there is no such PID. */
export function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT" || code === "ESRCH") return null;
    throw error;
  }
  return parseProcStat(text);
}

export function readBootId(): string {
  return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
}

function isDeadState(state: string): boolean {
  return state === "Z" || state === "X" || state === "x";
}

/** The identity of a process that is alive now, or null. */
export function identify(pid: number, bootId: string): ProcessIdentity | null {
  const stat = readProcStat(pid);
  if (stat === null || isDeadState(stat.state)) return null;
  return { pid, startTicks: stat.startTicks, bootId };
}

/** True only if that very incarnation is still running (not a zombie, not a reused PID). */
export function isAlive(identity: ProcessIdentity, currentBootId: string): boolean {
  if (identity.bootId !== currentBootId) return false;
  const stat = readProcStat(identity.pid);
  return stat !== null && !isDeadState(stat.state) && stat.startTicks === identity.startTicks;
}

/**
 * Signals a whole process group, ignoring "no such group". Returns whether a signal was sent.
 * Callers verify the group is theirs first (see `groupMayBeOurs`).
 */
export function signalGroup(processGroup: number, signal: NodeJS.Signals): boolean {
  if (!Number.isInteger(processGroup) || processGroup <= 1) return false;
  try {
    process.kill(-processGroup, signal);
    return true;
  } catch (error) {
    if (errorCode(error) === "ESRCH") return false;
    throw error;
  }
}

/**
 * Whether group `leader.pid` can still be the group that leader started. While any member of
 * a group lives, the kernel does not hand its id to a new process; so either the leader is
 * still that incarnation, or no process holds the PID (the leader exited, members may remain).
 * A different live process under that PID means our group is gone.
 */
export function groupMayBeOurs(leader: ProcessIdentity, currentBootId: string): boolean {
  if (leader.bootId !== currentBootId) return false;
  const stat = readProcStat(leader.pid);
  if (stat === null) return true;
  return stat.startTicks === leader.startTicks;
}
