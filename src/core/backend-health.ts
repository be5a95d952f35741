/**
 * The one verdict on the backend's health, and the only place it is decided. Two witnesses
 * feed it, neither of which is a verdict on its own:
 *  - the backend's own report (`AllocationBackend.diagnostics()`): what its last call to the
 *    resource plane said, whether its directories can be written. It learns of an outage only
 *    when a call fails, which against a hung scheduler takes the whole command timeout;
 *  - the reconciler's call watch (`reconciler/watch.ts`): every backend call as it happens,
 *    degraded the moment one is in flight past the slow limit or the last one got no answer.
 * After the scheduler stopped, the report alone said "healthy" for ~10 s while the listing in
 * flight timed out; the watch alone misses what no call exercises (an unwritable record
 * directory). So the backend is healthy only when both say so, and the message is the
 * witness that saw the trouble. `/v1/diagnostics`, `/metrics` and `/ui/cluster` show this
 * verdict and nothing else (`servers/http/system/backend-health.ts` asks both witnesses).
 *
 * The reconciler's pacing (no new submissions while a call hangs) reads the watch directly:
 * it is deciding whether to add a call, not whether the backend is healthy.
 */
import type { BackendDiagnostics } from "./ports/allocation-backend.ts";

/** What the call watch saw: degraded from the moment a call is slow or went unanswered. */
export type WatchedHealth =
  | { readonly kind: "Healthy" }
  | { readonly kind: "Degraded"; readonly message: string };

export interface BackendHealthVerdict {
  readonly healthy: boolean;
  /** The watch's message when it saw trouble, else the backend's own. */
  readonly message: string;
}

export function backendHealthVerdict(
  report: Pick<BackendDiagnostics, "healthy" | "message">,
  watched: WatchedHealth,
): BackendHealthVerdict {
  if (watched.kind === "Degraded") return { healthy: false, message: watched.message };
  return { healthy: report.healthy, message: report.message };
}
