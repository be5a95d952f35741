import type { StoreDeps } from "../deps.ts";

export type ReleaseResult =
  | { readonly kind: "Released" }
  | { readonly kind: "NotFound" }
  /** Not held (never was, or released already): nothing to do, answered as it is. */
  | { readonly kind: "NotHeld" }
  /** Ended while held (cancelled): it cannot run any more. */
  | { readonly kind: "Ended" };

/**
 * Lets a held workload run: `held` back to 0 and its AWAITING_RELEASE reason cleared, in one
 * compare-and-set on held = 1 and PENDING, so two releases (or a release racing a cancel)
 * change it at most once. The row's change wakes the reconciler's live view.
 */
export function releaseWorkload(deps: StoreDeps, workloadId: string): ReleaseResult {
  const sqlite = deps.db.$client;
  const now = deps.clock.now();
  return sqlite.transaction((): ReleaseResult => {
    const row = sqlite
      .query<{ held: number; phase: string }, [string]>(
        "SELECT held, phase FROM workloads WHERE id = ?",
      )
      .get(workloadId);
    if (row === null) return { kind: "NotFound" };
    if (row.held === 0) return { kind: "NotHeld" };
    if (row.phase !== "PENDING") return { kind: "Ended" };
    sqlite
      .query<never, [number, string]>(
        "UPDATE workloads SET held = 0, reason = NULL, message = 'released', message_admin = NULL, updated_at = ? WHERE id = ? AND held = 1 AND phase = 'PENDING'",
      )
      .run(now, workloadId);
    sqlite
      .query<never, [string, number]>(
        "INSERT INTO events (workload_id, at, phase, message) VALUES (?, ?, 'PENDING', 'released')",
      )
      .run(workloadId, now);
    return { kind: "Released" };
  })();
}
