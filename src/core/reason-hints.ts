/**
 * What each reason asks a person to do, in one sentence. The API shows it as `hint` beside a
 * workload's reason, and the README's reason table says the same in more words. Reasons that
 * ask nothing of anyone (EXITED_ZERO, STARTED, ...) have no hint.
 */
import type { Reason } from "./models.ts";

export const REASON_HINTS: Readonly<Partial<Record<Reason, string>>> = {
  NONZERO_EXIT: "the program failed: read its stderr log and exit code",
  TIME_LIMIT_EXCEEDED:
    "it ran out of time: raise timeLimitSeconds, or pick a profile with a longer limit",
  OUT_OF_MEMORY: "it ran out of memory: pick a profile with more memory (GET /v1/profiles)",
  NODE_FAILURE: "a node failed under it, not your code: resubmit (a retry may already follow)",
  PREEMPTED: "it was preempted for higher-priority work: resubmit, or it is retried",
  BOOT_FAILURE: "its nodes failed to start: resubmit; tell an administrator if it repeats",
  DEADLINE_EXCEEDED: "it could not start before its deadline: resubmit",
  TIME_LIMIT_NEAR:
    "it nears its time limit: save your work now (timeRemainingSeconds, or the kernel's time_remaining(), says how long)",
  ADMIN_CANCELLED: "an administrator stopped it: ask them why before resubmitting",
  SUBMIT_REJECTED: "the cluster refused the request: check the profile and the message",
  PROFILE_DEGRADED:
    "the cluster refuses every submission to this profile: an administrator must fix the profile or the cluster; the workload waits and is retried",
  SUBMIT_REFUSED:
    "the cluster refused this submission once: it waits while the server tells whether the profile or this request is at fault",
  ACCOUNT_UNUSABLE:
    "the unix user your work runs as cannot run it (missing, root or a system user): an administrator must fix your principal's unix user",
  NOT_FOUND_BY_BACKEND: "the cluster lost track of it: resubmit",
  ATTEMPTS_EXHAUSTED: "every attempt ended on an infrastructure failure: tell an administrator",
  WAITING_FOR_RESOURCES: "it waits its turn for free resources: nothing to do but wait",
  HELD: "an administrator holds it: ask them to release it",
  DEPENDENCY:
    "it waits for the workloads it runs after (the message names them): nothing to do but wait",
  DEPENDENCY_NEVER_SATISFIED:
    "a workload it runs after ended so that it never can (the message names it): fix that one, then resubmit both",
  AWAITING_RELEASE:
    "it was created held: upload its input, then release it (POST /v1/workloads/{id}/release, or openai4s release)",
  LIMIT_REACHED:
    "a usage limit (jobs, CPUs, time per user or group) is reached: wait for your other work to end, or stop some",
  NODES_UNAVAILABLE:
    "the nodes it needs are down or drained: wait for repair, or ask an administrator",
  CANNOT_START:
    "the request can never start as asked: pick another profile or a shorter timeLimitSeconds",
  REQUEUED: "the scheduler put it back in the queue: nothing to do but wait",
  SUSPENDED: "it is paused by the scheduler and keeps its place: nothing to do but wait",
  IDLE_TIMEOUT: "it was idle too long: start a new session",
  MAX_LIFETIME: "it reached its maximum lifetime: start a new session",
  ISOLATION_UNAVAILABLE: "this server cannot isolate sessions: tell an administrator",
  ENVIRONMENT_UNAVAILABLE:
    "the session's environment is not usable on the node it ran on (the message names the path or module line, and the node): tell an administrator, or start the session with another environment",
  SPOOL_FULL:
    "the server's job filesystem was full, not your code's fault: free space in your workspaces, tell an administrator, then resubmit",
};

/**
 * Reasons whose backend may explain them with the job's own figures, in a message of the
 * form "REASON: figures: what to do" ("OUT_OF_MEMORY: used 1.9 GiB of the 2.0 GiB asked
 * for: ask for more memory (profile with more memory: big-mem)"). That explanation is a
 * better hint than the generic sentence: it says how far off the request was and where to go.
 */
const FIGURED_REASONS: ReadonlySet<string> = new Set<Reason>([
  "OUT_OF_MEMORY",
  "TIME_LIMIT_EXCEEDED",
]);

/**
 * The hint for a reason; with the workload's message, the backend's own explanation when the
 * message carries one for exactly this reason (a message of another form, or of another
 * reason, never leaks into the hint).
 */
export function hintFor(
  reason: string | null,
  message: string | null = null,
  ranOutOfTime: RanOutOfTime | null = null,
): string | null {
  if (reason === null || !Object.hasOwn(REASON_HINTS, reason)) return null;
  const prefix = `${reason}: `;
  if (FIGURED_REASONS.has(reason) && message?.startsWith(prefix) === true) {
    const explained = message.slice(prefix.length).trim();
    // Only an explanation that says what to do: figures alone are not a hint.
    if (explained.includes(": ")) return explained;
  }
  // A backend whose message has no figures (the local one): the attempt's own times say it.
  if (reason === "TIME_LIMIT_EXCEEDED" && ranOutOfTime !== null) {
    const ran = formatHms(ranOutOfTime.ranSeconds);
    return `ran ${ran} of ${formatHms(ranOutOfTime.limitSeconds)}: raise timeLimitSeconds`;
  }
  return REASON_HINTS[reason as Reason] ?? null;
}

/** How long an attempt that ran out of time ran, and how long it had (from its start). */
export interface RanOutOfTime {
  readonly ranSeconds: number;
  readonly limitSeconds: number;
}

/** "310 MiB", "1.9 GiB": memory as a limit is read. */
export function formatBytes(bytes: number): string {
  const mib = bytes / 1024 ** 2;
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${Math.round(mib)} MiB`;
}

/** "1:00:04": hours, minutes, seconds, as a time limit is read. */
export function formatHms(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${h}:${pad(m)}:${pad(s % 60)}`;
}
