/**
 * The admin's routes for principals and their tokens (issue 22). Every one is admin-only:
 * app.ts answers a principal 403 before any of these runs.
 */
import { Hono } from "hono";
import type * as v from "valibot";
import {
  addPrincipal,
  insertToken,
  listPrincipals,
  removePrincipal,
  revokeToken,
} from "../../../adapters/store-sqlite/index.ts";
import { checkAccount } from "../../../core/accounts.ts";
import type { Principal } from "../../../core/principals.ts";
import type { AccessCache } from "../access-cache.ts";
import { mintPrincipalToken } from "../auth.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError, notFound } from "../problem.ts";
import { readBody } from "../validation.ts";
import { iso } from "../views.ts";
import {
  type IssuedTokenSchema,
  PrincipalBody,
  type PrincipalSchema,
  TokenBody,
} from "./schemas.ts";

function principalView(p: Principal): v.InferOutput<typeof PrincipalSchema> {
  return {
    name: p.name,
    unixUser: p.unixUser,
    maxSessions: p.maxSessions,
    maxBatch: p.maxBatch,
    maxCpus: p.maxCpus,
    maxGpus: p.maxGpus,
    createdAt: iso(p.createdAt),
  };
}

/**
 * A principal's work may run as its unix account: one work must never run as (root, a
 * system account, a missing one) is refused here, naming it, rather than at each job.
 */
function refuseUnusableAccount(deps: ApiDeps, unixUser: string | null | undefined): void {
  if (deps.accounts === undefined || unixUser === undefined || unixUser === null) return;
  const checked = checkAccount(unixUser, deps.accounts.lookup, deps.accounts.minUid);
  if (checked.kind === "Usable") return;
  throw new ApiError({
    status: 422,
    slug: "account-unusable",
    title: "Unusable unix user",
    detail: checked.message,
    errors: [{ path: "unixUser", message: checked.message }],
  });
}

export function createPrincipalRoutes(deps: ApiDeps, access: AccessCache) {
  const app = new Hono<ApiEnv>();
  const defaults = deps.principalDefaults;

  app.get("/v1/principals", function listAll(c) {
    return c.json({ items: listPrincipals(deps.store).map(principalView) });
  });

  app.post("/v1/principals", async function add(c) {
    const body = await readBody(c, PrincipalBody);
    refuseUnusableAccount(deps, body.unixUser);
    // An absent limit takes the daemon's default; an explicit null is "unlimited".
    const pick = (given: number | null | undefined, fallback: number | null | undefined) =>
      given !== undefined ? given : (fallback ?? null);
    const result = addPrincipal(deps.store, {
      name: body.name,
      unixUser: body.unixUser ?? null,
      maxSessions: pick(body.maxSessions, defaults?.maxSessions),
      maxBatch: pick(body.maxBatch, defaults?.maxBatch),
      maxCpus: pick(body.maxCpus, defaults?.maxCpus),
      maxGpus: pick(body.maxGpus, defaults?.maxGpus),
    });
    if (result.kind === "Exists") {
      throw new ApiError({
        status: 409,
        slug: "already-exists",
        title: "Already exists",
        detail:
          result.field === "name"
            ? `a principal named ${JSON.stringify(body.name)} already exists`
            : `another principal already has unix user ${JSON.stringify(body.unixUser)}`,
      });
    }
    deps.log.info("principal added", { principal: body.name });
    return c.json(principalView(result.principal), 201);
  });

  app.delete("/v1/principals/:name", function remove(c) {
    const name = c.req.param("name");
    const removed = removePrincipal(deps.store, name);
    // Its tokens went with it (cascade): none may still be held as valid.
    access.forgetTokens();
    if (removed === "NotFound") {
      throw notFound(`no principal ${JSON.stringify(name)}`);
    }
    deps.log.info("principal removed", { principal: name });
    return c.body(null, 204);
  });

  app.post("/v1/principals/:name/tokens", async function issue(c) {
    const name = c.req.param("name");
    const body = await readBody(c, TokenBody);
    const minted = mintPrincipalToken();
    const expiresAt =
      body.expiresInSeconds === undefined ? null : deps.clock.now() + body.expiresInSeconds * 1000;
    const result = insertToken(deps.store, {
      id: minted.id,
      principal: name,
      secretSha256: minted.secretSha256,
      expiresAt,
    });
    if (result === "NoPrincipal") throw notFound(`no principal ${JSON.stringify(name)}`);
    deps.log.info("token issued", { principal: name, tokenId: minted.id });
    const answer: v.InferOutput<typeof IssuedTokenSchema> = {
      id: minted.id,
      principal: name,
      token: minted.token,
      expiresAt: expiresAt === null ? null : iso(expiresAt),
    };
    return c.json(answer, 201);
  });

  app.post("/v1/tokens/:id/revoke", function revoke(c) {
    const id = c.req.param("id");
    const revoked = revokeToken(deps.store, id);
    // Held in memory by authentication: it must stop working now, not when evicted.
    access.forgetTokens();
    if (revoked === "NotFound") throw notFound(`no token ${JSON.stringify(id)}`);
    deps.log.info("token revoked", { tokenId: id });
    return c.json({ id, revoked: true });
  });

  return app;
}
