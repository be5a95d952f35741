import type { Allocation, ExternalHandle, SubmissionToken } from "../models.ts";
import type {
  AllocationObservation,
  FindResult,
  ObservationCursor,
  ObservationTarget,
  ObservedChange,
} from "../ports/allocation-backend.ts";
import type { TickEnv } from "./env.ts";

/** An allocation as the backend observes it: with its array size when it is an array. */
export function observationTarget(a: Allocation, handle: ExternalHandle): ObservationTarget {
  const size = a.arraySize;
  return size === undefined || size === null
    ? { allocationId: a.id, token: a.token, handle }
    : { allocationId: a.id, token: a.token, handle, arraySize: size };
}

/** What the backend said this tick: at most one observe and one findByToken, for everyone. */
export interface BackendReads {
  /** Null when the observe call was Unavailable (BACKEND_UNAVAILABLE: change nothing). */
  readonly observations: ReadonlyMap<string, AllocationObservation> | null;
  readonly found: ReadonlyMap<SubmissionToken, FindResult>;
}

/**
 * `observed`: allocations with a handle. `unresolved`: allocations whose submission outcome
 * was never recorded (Unknown, or the tick died around submit): the token is the only way
 * to ask whether they landed. Both calls are reads and independent, so they run together.
 */
export async function readBackend(
  env: TickEnv,
  observed: readonly Allocation[],
  unresolved: readonly Allocation[],
): Promise<BackendReads> {
  const targets: ObservationTarget[] = [];
  for (const a of observed) {
    if (a.handle !== null) targets.push(observationTarget(a, a.handle));
  }
  const [observation, found] = await Promise.all([
    env.backend.observe(targets),
    env.backend.findByToken(unresolved.map((a) => a.token)),
  ]);
  if (observation.kind === "Unavailable") {
    env.log.warn("backend unavailable; phases left as they are", { message: observation.message });
  }
  return {
    observations: observation.kind === "Observed" ? observation.observations : null,
    found,
  };
}

/** `readBackend` through a ChangeReporter: the targets, plus what else changed. */
export interface ChangeReads {
  readonly reads: BackendReads;
  /** Changes after the cursor given (the caller keeps those it did not target). */
  readonly changes: readonly ObservedChange[];
  /** The cursor for the next call; null when the feed must start over (a full look). */
  readonly cursor: ObservationCursor | null;
}

export async function readBackendChanges(
  env: TickEnv,
  cursor: ObservationCursor | null,
  observed: readonly Allocation[],
  unresolved: readonly Allocation[],
): Promise<ChangeReads> {
  const targets: ObservationTarget[] = [];
  for (const a of observed) {
    if (a.handle !== null) targets.push(observationTarget(a, a.handle));
  }
  const [result, found] = await Promise.all([
    env.backend.observeChanges(cursor, targets),
    env.backend.findByToken(unresolved.map((a) => a.token)),
  ]);
  switch (result.kind) {
    case "Observed":
      return {
        reads: { observations: result.observations, found },
        changes: result.changes,
        cursor: result.cursor,
      };
    case "Unavailable":
      env.log.warn("backend unavailable; phases left as they are", { message: result.message });
      return { reads: { observations: null, found }, changes: [], cursor: null };
    case "CursorExpired":
      // Nothing observed this tick: the next one observes everything from a new cursor.
      env.log.info("backend no longer knows the observation cursor; next tick looks at all");
      return { reads: { observations: null, found }, changes: [], cursor: null };
    default: {
      const unreachable: never = result;
      throw new Error(`unhandled observe result ${JSON.stringify(unreachable)}`);
    }
  }
}
