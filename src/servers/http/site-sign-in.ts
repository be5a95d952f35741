/**
 * Site sign-in at the door (issue 32): a JWT from the site's OIDC issuer as the bearer
 * token, or a MUNGE credential (`Authorization: MUNGE CREDENTIAL`) from the login node.
 * Answers the caller, or null when the request carries neither (the project's own tokens
 * are then tried, auth.ts). A credential that is presented and fails is a 401 naming why;
 * a proved account that is not (and may not become) a principal is a 403 naming the fix.
 */

import type { MungeBinding, SiteIdentity } from "../../core/ports/site-identity.ts";
import { ADMIN, type Caller } from "../../core/principals.ts";
import type { Log } from "../../lib/log.ts";
import type { Access } from "./deps.ts";
import { type ProvisionDeps, principalForAccount } from "./principals/provision.ts";
import { ApiError } from "./problem.ts";

/** Three base64url parts: a JWS in compact form (an unsigned `alg: none` has an empty third). */
const JWT_SHAPE = /^\s*Bearer\s+([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)\s*$/i;
const MUNGE_SHAPE = /^\s*MUNGE\s+(\S{1,8192})\s*$/i;

function unauthorized(detail: string): ApiError {
  return new ApiError({ status: 401, slug: "unauthorized", title: "Unauthorized", detail });
}

export interface SiteSignInDeps extends Omit<ProvisionDeps, "accountRefusal"> {
  readonly identity: SiteIdentity;
  readonly log: Log;
}

/** Who a MUNGE credential must be bound to on this listener; null: MUNGE is not taken here. */
function mungeAudience(access: Access, host: string | undefined): string | null {
  if (access.kind !== "Bearer") return null;
  if (access.socketPath !== undefined) return `unix:${access.socketPath}`;
  return host === undefined ? null : `tcp:${host}`;
}

export async function siteCaller(
  deps: SiteSignInDeps,
  access: Access | undefined,
  authorization: string | undefined,
  request: { readonly method: string; readonly path: string; readonly host: string | undefined },
): Promise<Caller | null> {
  // The admin's socket is the admin's by its file mode; nothing here changes that.
  if (access === undefined || access.kind !== "Bearer" || authorization === undefined) return null;
  const { identity } = deps;
  const jwt = JWT_SHAPE.exec(authorization)?.[1];
  if (jwt !== undefined && identity.oidc !== null) {
    const verdict = await identity.oidc.verify(jwt);
    if (verdict.kind === "Refused") throw unauthorized(verdict.message);
    return principalCaller(deps, verdict.account, verdict.uid, true, verdict.via);
  }
  const munge = MUNGE_SHAPE.exec(authorization)?.[1];
  if (munge === undefined) return null;
  const audience = mungeAudience(access, request.host);
  if (identity.munge === null || audience === null) {
    throw unauthorized("this daemon does not accept MUNGE credentials here");
  }
  const binding: MungeBinding = { method: request.method, path: request.path, audience };
  const verdict = await identity.munge.verify(munge, binding);
  if (verdict.kind === "Refused") throw unauthorized(verdict.message);
  // The daemon's own user and root hold the admin token already: the admin, as on the socket.
  if (verdict.uid === 0 || verdict.uid === identity.daemonUid) return ADMIN;
  return principalCaller(
    deps,
    verdict.account,
    verdict.uid,
    identity.mungeCreatesPrincipals,
    verdict.via,
  );
}

function principalCaller(
  deps: SiteSignInDeps,
  account: string,
  uid: number | null,
  create: boolean,
  via: string,
): Caller {
  const found = principalForAccount(
    { ...deps, accountRefusal: (a) => deps.identity.accountRefusal(a) },
    account,
    uid,
    create,
  );
  if (found.kind === "Refused") {
    throw new ApiError({
      status: 403,
      slug: "forbidden",
      title: "Forbidden",
      detail: `signed in as ${account}, but ${found.message}`,
    });
  }
  if (found.created)
    deps.log.info("principal created on first sign-in", { principal: found.name, via });
  return { kind: "Principal", name: found.name, tokenId: null };
}
