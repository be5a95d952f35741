/**
 * Who the site says a caller is (issue 32): a JWT from the site's OIDC issuer, or a MUNGE
 * credential from the login node. Each verifier answers the unix account it proved, or why
 * not; the HTTP server maps the account to its principal (creating it on first use where
 * the site allows). Bound in the composition to adapters/identity-oidc and identity-munge.
 */

/** What a verifier proved, or why it refused (always a 401: the detail is for the caller). */
export type IdentityVerdict =
  | {
      readonly kind: "Proved";
      /** The unix account the credential names. */
      readonly account: string;
      /** The account's uid, when the verifier knows it (MUNGE does; a JWT claim does not). */
      readonly uid: number | null;
      /** What names the credential in the audit log (never the credential): `oidc:SUB`. */
      readonly via: string;
    }
  | { readonly kind: "Refused"; readonly message: string };

export interface JwtVerifier {
  verify(token: string): Promise<IdentityVerdict>;
}

/** What a MUNGE credential's payload must carry: this request, to this daemon. */
export interface MungeBinding {
  readonly method: string;
  /** The path and query as requested. */
  readonly path: string;
  /** `unix:SOCKET` or `tcp:HOST:PORT` as the client dialled it (the Host header on TCP). */
  readonly audience: string;
}

export interface MungeVerifier {
  verify(credential: string, binding: MungeBinding): Promise<IdentityVerdict>;
}

export interface SiteIdentity {
  /** Null: no issuer configured, JWTs are not accepted. */
  readonly oidc: JwtVerifier | null;
  /** Null: MUNGE is not accepted. */
  readonly munge: MungeVerifier | null;
  /** A MUNGE-proved account with no principal yet gets one (else 403 naming the fix). */
  readonly mungeCreatesPrincipals: boolean;
  /**
   * Why `account` may not be a principal (root, a system account, no such account), or
   * null. Applied before a principal is created on first use.
   */
  accountRefusal(account: string): string | null;
  /** The daemon's own uid: a MUNGE credential from it (or from root) is the admin. */
  readonly daemonUid: number;
}
