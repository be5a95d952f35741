/**
 * The worker gateway's one need from persistence: a credential nonce is used at most once,
 * across processes and restarts (a replayed first credential is refused). Implemented by
 * adapters/store-sqlite/stores/nonce-burner.ts.
 */
export interface BurnNonceInput {
  readonly nonce: string;
  readonly allocationId: string;
  /** When the credential expires: after that its nonce may be forgotten. */
  readonly expiresAt: number;
}

export interface NonceBurner {
  /** True when this call burned the nonce, false when it was already burned (a replay). */
  burn(input: BurnNonceInput): boolean;
  /** Forgets nonces of expired credentials (refused by their expiry anyway); how many. */
  prune(): number;
}
