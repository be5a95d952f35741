/**
 * A job that failed while the spool was full is SPOOL_FULL, not NONZERO_EXIT, on a backend
 * whose jobs end where the daemon cannot watch them (a cluster's nodes). The local
 * supervisor names such an end itself, on the spot; a cluster's job only ends as "FAILED,
 * exit code 1" in accounting, and the user was told their code failed when it could not
 * write a byte of its output (issue 18). The daemon shares the spool with the nodes, so when
 * it sees the failure it asks how full the spool is, once per answer that has such an end.
 *
 * Judged as the local supervisor judges: below FULL_BELOW_BYTES free, a failed program
 * could not write its files or logs. A failure seen after space came back stays
 * NONZERO_EXIT (the log then says why); a spool that cannot be read changes nothing.
 */
import { decorateBackend } from "./decorate-backend.ts";
import type { SubmissionToken } from "./models.ts";
import type {
  AllocationBackend,
  AllocationObservation,
  FindResult,
  ObserveChangesResult,
  ObserveResult,
} from "./ports/allocation-backend.ts";

/** The spool's figures (what an unprivileged writer may still use); null when unreadable. */
export interface SpoolFullness {
  /** Below this a job cannot write (the supervisor's threshold). */
  readonly fullBelowBytes: number;
  read(): { readonly freeBytes: number; readonly totalBytes: number } | null;
  /** `1.5 GiB`, for the message. */
  format(bytes: number): string;
}

type Observed = Extract<AllocationObservation, { readonly kind: "Observed" }>;

function failedByItsCode(o: AllocationObservation): o is Observed {
  return o.kind === "Observed" && o.phase === "FAILED" && o.reason === "NONZERO_EXIT";
}

/** Rewrites the failures of one answer; reads the spool at most once, and only if needed. */
function rewriter(spool: SpoolFullness): (o: AllocationObservation) => AllocationObservation {
  let note: string | null | undefined;
  const fullNote = (): string | null => {
    if (note !== undefined) return note;
    const space = spool.read();
    note =
      space === null || space.freeBytes >= spool.fullBelowBytes
        ? null
        : `the spool's filesystem was full when its end was seen (${spool.format(space.freeBytes)} free of ${spool.format(space.totalBytes)}): it could not write its files or logs`;
    return note;
  };
  return (o) => {
    if (!failedByItsCode(o)) return o;
    const full = fullNote();
    if (full === null) return o;
    const how = o.message === null ? "" : `${o.message}; `;
    return { ...o, reason: "SPOOL_FULL", message: `${how}${full}` };
  };
}

function mapObservations<K>(
  observations: ReadonlyMap<K, AllocationObservation>,
  rewrite: (o: AllocationObservation) => AllocationObservation,
): Map<K, AllocationObservation> {
  return new Map([...observations].map(([k, o]) => [k, rewrite(o)]));
}

function rewriteObserve(result: ObserveResult, spool: SpoolFullness): ObserveResult {
  if (result.kind !== "Observed") return result;
  return { ...result, observations: mapObservations(result.observations, rewriter(spool)) };
}

function rewriteChanges(result: ObserveChangesResult, spool: SpoolFullness): ObserveChangesResult {
  if (result.kind !== "Observed") return result;
  const rewrite = rewriter(spool);
  return {
    ...result,
    observations: mapObservations(result.observations, rewrite),
    changes: result.changes.map((c) => ({ ...c, observation: rewrite(c.observation) })),
  };
}

function rewriteFound(
  results: ReadonlyMap<SubmissionToken, FindResult>,
  spool: SpoolFullness,
): Map<SubmissionToken, FindResult> {
  const rewrite = rewriter(spool);
  return new Map(
    [...results].map(([token, r]) => [
      token,
      r.kind === "Found" ? { ...r, observation: rewrite(r.observation) } : r,
    ]),
  );
}

/** `backend` with its FAILED/NONZERO_EXIT ends named SPOOL_FULL while the spool is full. */
export function withSpoolFullEndings<B extends AllocationBackend>(
  backend: B,
  spool: SpoolFullness,
): B {
  const base: Pick<AllocationBackend, "observe" | "findByToken"> = {
    async observe(targets) {
      return rewriteObserve(await backend.observe(targets), spool);
    },
    async findByToken(tokens) {
      return rewriteFound(await backend.findByToken(tokens), spool);
    },
  };
  // The change feed is rewritten too when the backend has one: the reconciler reads endings
  // from it, and a carried feed would bypass the rewrite (decorate-backend.ts).
  const changes = backend.capabilities.changes;
  if (changes === null) return decorateBackend(backend, base);
  return decorateBackend(backend, base, {
    changes: {
      async observeChanges(cursor, targets) {
        return rewriteChanges(await changes.observeChanges(cursor, targets), spool);
      },
    },
  });
}
