/**
 * Why a job ended, in numbers a person can act on: "used 310 MiB of the 50 MiB asked for",
 * "ran 0:01:04 of 0:01:00". From sacct's MaxRSS/ReqMem and ElapsedRaw/TimelimitRaw.
 *
 * It also finds the out-of-memory end a site without cgroups reports as a plain failure:
 * measured on 22.05 with JobAcctGatherParams=OverMemoryKill (no cgroup), a job killed for its
 * memory ends FAILED with signal 9, and only its steps' MaxRSS against its ReqMem says why.
 * A kill by signal 9 whose peak memory reached what the job asked for is OUT_OF_MEMORY: the
 * user action is "ask for more memory", not "debug your exit code".
 */
import type { ResourceProfile } from "../../core/models.ts";
import type { AllocationObservation } from "../../core/ports/allocation-backend.ts";
import { formatBytes, formatHms } from "../../core/reason-hints.ts";
import type { JobUsage } from "./parse-usage.ts";

type Observed = Extract<AllocationObservation, { readonly kind: "Observed" }>;

/** 128 + SIGKILL: what a memory kill (or any SIGKILL) leaves as the exit code. */
const KILLED_EXIT_CODE = 137;
/** Peak memory this close to the request counts as having hit it (samples are periodic). */
const MEMORY_HIT_RATIO = 0.9;

/** Endings whose explanation needs the usage query. */
export function needsUsage(o: AllocationObservation): o is Observed {
  if (o.kind !== "Observed" || o.phase !== "FAILED") return false;
  return (
    o.reason === "OUT_OF_MEMORY" ||
    o.reason === "TIME_LIMIT_EXCEEDED" ||
    (o.reason === "NONZERO_EXIT" && o.exitCode === KILLED_EXIT_CODE)
  );
}

/** "1:00:04": the same reading the API's hints use. */
export function formatDuration(seconds: number): string {
  return formatHms(seconds);
}

function memoryHit(u: JobUsage): boolean {
  return (
    u.maxRssBytes !== null &&
    u.requestedMemoryBytes !== null &&
    u.maxRssBytes >= u.requestedMemoryBytes * MEMORY_HIT_RATIO
  );
}

/**
 * The profile a job that ran out of memory can move to: the one with the least memory per
 * node that is still more than the job asked for (and than it used), so the advice names a
 * real next step instead of "the biggest there is". Null when no profile has more.
 */
export function moreMemoryProfile(
  profiles: readonly ResourceProfile[],
  usage: JobUsage,
): string | null {
  const neededBytes = Math.max(usage.requestedMemoryBytes ?? 0, usage.maxRssBytes ?? 0);
  if (neededBytes === 0) return null;
  let best: ResourceProfile | null = null;
  for (const p of profiles) {
    const mb = p.resources.memoryMb;
    if (mb === null || mb * 1024 ** 2 <= neededBytes) continue;
    if (best === null || mb < (best.resources.memoryMb ?? Number.POSITIVE_INFINITY)) best = p;
  }
  return best?.name ?? null;
}

/**
 * The observation with its reason settled and the numbers in its message, as
 * "REASON: figures: what to do" (the API shows all after "REASON: " as the workload's `hint`,
 * reason-hints.ts); an out-of-memory end names the profile to move to when `profiles` has
 * one with more memory.
 */
export function explainEnding(
  o: Observed,
  usage: JobUsage | undefined,
  profiles: readonly ResourceProfile[] = [],
): Observed {
  if (usage === undefined) return o;
  const outOfMemory =
    o.reason === "OUT_OF_MEMORY" || (o.reason === "NONZERO_EXIT" && memoryHit(usage));
  if (outOfMemory) {
    const used =
      usage.maxRssBytes === null || usage.requestedMemoryBytes === null
        ? "ran out of memory"
        : `used ${formatBytes(usage.maxRssBytes)} of the ${formatBytes(usage.requestedMemoryBytes)} asked for`;
    const bigger = moreMemoryProfile(profiles, usage);
    const advice =
      bigger === null
        ? "ask for more memory (GET /v1/profiles)"
        : `ask for more memory (profile with more memory: ${bigger})`;
    return { ...o, reason: "OUT_OF_MEMORY", message: `OUT_OF_MEMORY: ${used}: ${advice}` };
  }
  if (o.reason === "TIME_LIMIT_EXCEEDED" && usage.timeLimitSeconds !== null) {
    const ran = usage.elapsedSeconds === null ? "?" : formatDuration(usage.elapsedSeconds);
    const limit = formatDuration(usage.timeLimitSeconds);
    return {
      ...o,
      message: `TIME_LIMIT_EXCEEDED: ran ${ran} of ${limit}: raise timeLimitSeconds`,
    };
  }
  return o;
}

/**
 * Accounting writes a step's MaxRSS when the step ends, a moment after the controller knows
 * the job ended. A SIGKILLed job whose usage is not there yet is not settled on a guess while
 * the grace lasts: deciding NONZERO_EXIT and writing it down would be permanent.
 */
export function usagePending(
  o: Observed,
  usage: JobUsage | undefined,
  nowMs: number,
  graceMs: number,
): boolean {
  if (o.reason !== "NONZERO_EXIT" || o.exitCode !== KILLED_EXIT_CODE) return false;
  // Both figures: right after a job ends, ReqMem was measured reading "16?" for a moment.
  if (usage !== undefined && usage.maxRssBytes !== null && usage.requestedMemoryBytes !== null) {
    return false;
  }
  return o.endedAt !== null && nowMs - o.endedAt < graceMs;
}
