/**
 * How many ranks each session attempt has, from the preparer's record (immutable once
 * written, so remembered). A record that is missing is "not prepared yet"; one that is
 * invalid is logged once and its workers are never admitted.
 */
import type { Log } from "../../lib/log.ts";
import type { Allocation, Workload } from "../models.ts";
import { SESSION_MAX_RANKS, type SessionAttempts } from "../ports/session-attempts.ts";

export type AttemptRanks = (workload: Workload, allocation: Allocation) => number | null;

export function createAttemptRanks(
  attempts: Pick<SessionAttempts, "read">,
  log: Log,
  maxRanksOf: ((workload: Workload) => number) | undefined,
): AttemptRanks {
  const ranksByAllocation = new Map<string, number>();
  const invalidAttempts = new Set<string>();
  return function ranksOf(workload: Workload, allocation: Allocation): number | null {
    const known = ranksByAllocation.get(allocation.id);
    if (known !== undefined) return known;
    if (invalidAttempts.has(allocation.id)) return null;
    const maxRanks = maxRanksOf?.(workload) ?? SESSION_MAX_RANKS;
    const read = attempts.read(workload.id, allocation.id, maxRanks);
    switch (read.kind) {
      case "Missing":
        return null;
      case "Invalid":
        // Logged once: the record does not change by itself, and a line every 200 ms
        // (issue 8) buries everything else in the log.
        invalidAttempts.add(allocation.id);
        log.error("session attempt record refused; its workers will not be admitted", {
          workloadId: workload.id,
          allocationId: allocation.id,
          problem: read.message,
        });
        return null;
      case "Valid":
        ranksByAllocation.set(allocation.id, read.record.ranks);
        return read.record.ranks;
      default: {
        const never: never = read;
        throw new Error(`unhandled read ${JSON.stringify(never)}`);
      }
    }
  };
}
