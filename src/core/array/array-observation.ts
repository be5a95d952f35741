/**
 * A job array's elements into one observation: its phase by the summary's rules
 * (array-summary.ts), its start the first element's and its end the last one's. Pure: a
 * backend reads its elements, this only sums them up.
 */
import { isTerminal } from "../models.ts";
import type { AllocationObservation } from "../ports/allocation-backend.ts";
import { type ElementState, summarizeArray } from "./array-summary.ts";

export interface TimedElementState extends ElementState {
  readonly startedAt: number | null;
  readonly endedAt: number | null;
}

export function arrayObservation(
  size: number,
  elements: ReadonlyMap<number, TimedElementState>,
): AllocationObservation {
  const summary = summarizeArray(size, elements);
  let startedAt: number | null = null;
  let endedAt: number | null = null;
  for (const e of elements.values()) {
    if (e.startedAt !== null && (startedAt === null || e.startedAt < startedAt)) {
      startedAt = e.startedAt;
    }
    if (e.endedAt !== null && (endedAt === null || e.endedAt > endedAt)) endedAt = e.endedAt;
  }
  return {
    kind: "Observed",
    phase: summary.phase,
    reason: summary.reason,
    message: summary.message,
    exitCode: summary.exitCode,
    startedAt: summary.phase === "QUEUED" ? null : startedAt,
    endedAt: isTerminal(summary.phase) ? endedAt : null,
    array: summary,
  };
}
