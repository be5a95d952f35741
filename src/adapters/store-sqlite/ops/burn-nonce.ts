import { lt } from "drizzle-orm";
import type { StoreDeps } from "../deps.ts";
import { burnedNonces } from "../schema.ts";

/**
 * Records a credential nonce as used. Returns true when this call burned it, false when it
 * was already burned (a replay). The primary key makes the check-and-set atomic across
 * processes and restarts.
 */
export function burnNonce(
  deps: StoreDeps,
  input: { readonly nonce: string; readonly allocationId: string; readonly expiresAt: number },
): boolean {
  const inserted = deps.db
    .insert(burnedNonces)
    .values({ ...input, burnedAt: deps.clock.now() })
    .onConflictDoNothing()
    .returning({ nonce: burnedNonces.nonce })
    .all();
  return inserted.length === 1;
}

/** Nonces of expired credentials can go: the expiry check refuses those credentials anyway. */
export function pruneBurnedNonces(deps: StoreDeps): number {
  return deps.db
    .delete(burnedNonces)
    .where(lt(burnedNonces.expiresAt, deps.clock.now()))
    .returning({ nonce: burnedNonces.nonce })
    .all().length;
}
