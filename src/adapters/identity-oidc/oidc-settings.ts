/** What the admin configures for sign-in through the site's OIDC issuer (`serve --oidc-*`). */
export interface OidcSettings {
  /** The issuer's URL, exactly as its tokens' `iss` says it. */
  readonly issuer: string;
  /** What tokens' `aud` must contain: the client id the site registered for openai4s. */
  readonly audience: string;
  /** The claim that names the unix account (`preferred_username` by default). */
  readonly userClaim: string;
  /**
   * Where the keys are: null fetches the issuer's discovery document and its `jwks_uri`;
   * a path reads a JWKS file (sites without outbound access), re-read on an unknown `kid`.
   */
  readonly jwksFile: string | null;
  /** An explicit JWKS URL, instead of the discovery document's; null: discovered. */
  readonly jwksUri: string | null;
}

export const DEFAULT_USER_CLAIM = "preferred_username";

/**
 * An unknown `kid` refetches the keys at most this often: a flood of tokens with made-up
 * kids must not become a flood of requests to the issuer (or reads of the file).
 */
export const KEY_REFETCH_COOLDOWN_MS = 30_000;

/** Keys are refetched at least this often even when every kid is known (revoked keys go). */
export const KEY_CACHE_MAX_AGE_MS = 10 * 60_000;
