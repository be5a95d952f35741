/**
 * Sessions are admitted only while no unsandboxed allocation is live. The sandbox covers
 * launches, not what already runs: a BATCH job started before the sandbox was verified (the
 * cluster controller was down at daemon start, or the daemon was restarted with isolation
 * newly available) keeps running outside it, as the same uid as every sandboxed job, and can
 * read a session's workspace and credential. So the isolation question a backend answers is
 * wrapped here: Verified only when, besides the backend's own verdict, every live
 * allocation was recorded as launched in the verified sandbox. Admission and attempt
 * preparation both ask it, so both refuse with ISOLATION_UNAVAILABLE naming the blockers.
 */
import { decorateBackend } from "../decorate-backend.ts";
import type { AllocationBackend, IsolationVerdict } from "../ports/allocation-backend.ts";

/** How many blocking allocation ids a refusal names (the rest are counted). */
const NAMED_BLOCKERS = 20;

export function guardedByLiveAllocations<B extends AllocationBackend>(
  backend: B,
  /** Ids of live allocations not launched in the verified sandbox, at most `limit`. */
  unsandboxedLive: (limit: number) => readonly string[],
): B {
  const provider = backend.capabilities.sessionIsolation;
  if (provider === null) return backend;
  const verifySessionIsolation = async (): Promise<IsolationVerdict> => {
    const verdict = await provider.verifySessionIsolation();
    if (verdict.kind !== "Verified") return verdict;
    const blocking = unsandboxedLive(NAMED_BLOCKERS + 1);
    if (blocking.length === 0) return verdict;
    const named = blocking.slice(0, NAMED_BLOCKERS).join(", ");
    const more = blocking.length > NAMED_BLOCKERS ? " and more" : "";
    return {
      kind: "Unverified",
      message: `allocations launched outside the verified sandbox are still live (${named}${more}); sessions are admitted once they have ended`,
    };
  };
  return decorateBackend(backend, {}, { sessionIsolation: { verifySessionIsolation } });
}
