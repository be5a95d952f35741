/**
 * Whether a verdict a previous run of the daemon stored still counts. The failure it
 * answers (issue 21): after every restart sessions were refused until a new probe job had
 * run on the nodes, and on a busy cluster that job waits in the queue like any other, so
 * sessions were unavailable for as long as the queue was long.
 *
 * It counts only when the same binary saw it (another build may sandbox differently) and it
 * is younger than its time to live; the probe runs again in the background at once anyway.
 * Trusting it is safe in one direction only, which is the one that matters: a remembered
 * Verified verdict turns launches INTO the sandbox, so a node that has since lost bubblewrap
 * fails its launches visibly; it never lets a session run outside one.
 */

import type { IsolationVerdict } from "../ports/allocation-backend.ts";
import type { StoredIsolationVerdict } from "../ports/isolation-verdict-store.ts";

/** How long a stored Verified verdict is used by a restarted daemon. */
export const REMEMBERED_VERDICT_TTL_MS = 60 * 60 * 1000;

export type RememberedVerdict =
  | { readonly kind: "Usable"; readonly verdict: IsolationVerdict & { readonly kind: "Verified" } }
  | { readonly kind: "Unusable"; readonly message: string };

export function judgeRememberedVerdict(
  stored: StoredIsolationVerdict | null,
  now: { readonly nowMs: number; readonly binary: string; readonly ttlMs: number },
): RememberedVerdict {
  if (stored === null) return { kind: "Unusable", message: "no verdict remembered" };
  if (stored.binary !== now.binary) {
    return {
      kind: "Unusable",
      message: `the remembered verdict was seen by another binary (${stored.binary})`,
    };
  }
  const ageMs = now.nowMs - stored.verifiedAt;
  // A time in the future (a clock set back) is not trusted either.
  if (ageMs < 0 || ageMs > now.ttlMs) {
    return {
      kind: "Unusable",
      message: `the remembered verdict is ${Math.round(ageMs / 1000)} s old (it counts for ${Math.round(now.ttlMs / 1000)} s)`,
    };
  }
  return {
    kind: "Usable",
    verdict: {
      kind: "Verified",
      mechanism: `${stored.mechanism} (remembered from ${new Date(stored.verifiedAt).toISOString()} on ${stored.nodes.join(", ") || "unnamed nodes"}; probing again)`,
    },
  };
}
