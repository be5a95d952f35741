/**
 * What the /ui login form accepts over TCP (issue 32): the admin token, a principal's token,
 * or a token from the site's OIDC issuer where one is configured. Each is checked exactly as
 * the API checks it (auth.ts, site-sign-in.ts), and a principal's login is checked again on
 * every page (`stillSignedIn`): a revoked token or a removed principal ends it at once.
 */
import { findToken, getPrincipal } from "../../../adapters/store-sqlite/index.ts";
import { ADMIN, type Caller } from "../../../core/principals.ts";
import { authorize, tokensMatch } from "../auth.ts";
import type { ApiDeps } from "../deps.ts";
import { ApiError } from "../problem.ts";
import { siteCaller } from "../site-sign-in.ts";

export type UiSignIn =
  | { readonly kind: "SignedIn"; readonly caller: Caller; readonly notAfterMs: number | null }
  | { readonly kind: "Refused"; readonly message: string };

type BearerAccess = { readonly kind: "Bearer"; readonly token: string };

export async function uiSignIn(
  deps: ApiDeps,
  access: BearerAccess,
  token: string,
): Promise<UiSignIn> {
  if (tokensMatch(token, access.token))
    return { kind: "SignedIn", caller: ADMIN, notAfterMs: null };
  const header = `Bearer ${token}`;
  const now = deps.clock.now();
  try {
    const site =
      deps.siteIdentity === undefined
        ? null
        : await siteCaller(
            {
              identity: deps.siteIdentity,
              store: deps.store,
              defaults: deps.principalDefaults,
              log: deps.log,
            },
            access,
            header,
            { method: "POST", path: "/ui/login", host: undefined },
          );
    const caller = site ?? authorize(access, header, (id) => findToken(deps.store, id), now);
    if (caller.kind === "Admin") return { kind: "SignedIn", caller, notAfterMs: null };
    const row = caller.tokenId === null ? null : findToken(deps.store, caller.tokenId);
    return { kind: "SignedIn", caller, notAfterMs: row?.expiresAt ?? null };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return { kind: "Refused", message: error.body().detail ?? "That token is not accepted here." };
  }
}

/** A principal's login still holds: its principal exists and its token is unrevoked. */
export function stillSignedIn(deps: ApiDeps, caller: Caller): boolean {
  if (caller.kind === "Admin") return true;
  if (getPrincipal(deps.store, caller.name) === null) return false;
  if (caller.tokenId === null) return true;
  const row = findToken(deps.store, caller.tokenId);
  if (row === null || row.principal !== caller.name || row.revokedAt !== null) return false;
  return row.expiresAt === null || row.expiresAt > deps.clock.now();
}
