/**
 * A session whose worker found its environment unusable on the node (its prefix or
 * interpreter not there, a module line failing) ends FAILED/ENVIRONMENT_UNAVAILABLE with the
 * worker's own words: the path or line, and the node. The worker tells the gateway and exits
 * 1, and a cluster only ever says "exit code 1" of that job (issue 30): the scientist was
 * told their session failed with nothing to act on, and the admin had to find the job log.
 *
 * The worker's report is noted per allocation as the gateway relays it; the backend's
 * observation of that allocation's FAILED/NONZERO_EXIT end is then given the report as its
 * reason, as spool-full-endings.ts names a full spool. The notes live in memory: a daemon
 * restarted between the report and the end sees "exit code 1" as before, nothing worse.
 */
import { decorateBackend } from "../decorate-backend.ts";
import type {
  AllocationBackend,
  AllocationObservation,
  ObserveChangesResult,
  ObserveResult,
} from "../ports/allocation-backend.ts";

export interface EnvironmentEndings {
  /** A worker of `allocationId` reported its environment unusable; the first report is kept. */
  note(allocationId: string, message: string): void;
  /** The report for `allocationId`, or null. */
  noteOf(allocationId: string): string | null;
}

/**
 * Far more allocations than end this way between two looks of the reconciler; a worker can
 * only report for its own live allocation, and the oldest notes go first past this.
 */
const MAX_NOTES = 1000;

export function createEnvironmentEndings(maxNotes = MAX_NOTES): EnvironmentEndings {
  const notes = new Map<string, string>();
  return {
    note(allocationId, message) {
      if (notes.has(allocationId)) return;
      if (notes.size >= maxNotes) {
        const oldest = notes.keys().next().value;
        if (oldest !== undefined) notes.delete(oldest);
      }
      notes.set(allocationId, message);
    },
    noteOf: (allocationId) => notes.get(allocationId) ?? null,
  };
}

function rewrite(
  endings: EnvironmentEndings,
  allocationId: string,
  o: AllocationObservation,
): AllocationObservation {
  if (o.kind !== "Observed" || o.phase !== "FAILED" || o.reason !== "NONZERO_EXIT") return o;
  const note = endings.noteOf(allocationId);
  return note === null ? o : { ...o, reason: "ENVIRONMENT_UNAVAILABLE", message: note };
}

function rewriteObserve(result: ObserveResult, endings: EnvironmentEndings): ObserveResult {
  if (result.kind !== "Observed") return result;
  return {
    ...result,
    observations: new Map([...result.observations].map(([id, o]) => [id, rewrite(endings, id, o)])),
  };
}

function rewriteChanges(
  result: ObserveChangesResult,
  endings: EnvironmentEndings,
): ObserveChangesResult {
  if (result.kind !== "Observed") return result;
  return {
    ...result,
    observations: new Map([...result.observations].map(([id, o]) => [id, rewrite(endings, id, o)])),
    changes: result.changes.map((c) => ({
      ...c,
      observation: rewrite(endings, c.target.allocationId, c.observation),
    })),
  };
}

/**
 * `backend` with the FAILED/NONZERO_EXIT end of an allocation whose worker reported its
 * environment unusable named ENVIRONMENT_UNAVAILABLE, with the report as its message.
 * `findByToken` is left as it is: it is keyed by token, not allocation, and answers only for
 * a submission whose outcome was unknown; an end found that way keeps the backend's words.
 */
export function withEnvironmentEndings<B extends AllocationBackend>(
  backend: B,
  endings: EnvironmentEndings,
): B {
  const observe = async (targets: Parameters<AllocationBackend["observe"]>[0]) =>
    rewriteObserve(await backend.observe(targets), endings);
  // The change feed is rewritten too: the reconciler reads endings from it, and a carried
  // feed would bypass the rewrite (decorate-backend.ts).
  const changes = backend.capabilities.changes;
  if (changes === null) return decorateBackend(backend, { observe });
  return decorateBackend(
    backend,
    { observe },
    {
      changes: {
        async observeChanges(cursor, targets) {
          return rewriteChanges(await changes.observeChanges(cursor, targets), endings);
        },
      },
    },
  );
}
