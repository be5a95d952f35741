/** `GET /v1/audit`: the audit log's entries, for the admin (`openai4s audit`). */
import { Hono } from "hono";
import * as v from "valibot";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { conflict, validationFailed } from "../problem.ts";
import { parseWith } from "../validation.ts";

const d = v.description;

export const AuditQuerySchema = v.strictObject({
  since: v.optional(
    v.pipe(v.string(), v.isoTimestamp(), d("Only entries at or after this time (ISO 8601).")),
  ),
  principal: v.optional(
    v.pipe(v.string(), v.maxLength(64), d("Only this principal's (or `admin`) requests.")),
  ),
  limit: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[0-9]{1,5}$/),
      d("The newest this many, at most 10000 (default 1000)."),
    ),
  ),
});

export const AuditListSchema = v.strictObject({
  items: v.pipe(
    v.array(
      v.strictObject({
        at: v.pipe(v.string(), d("When (ISO 8601).")),
        principal: v.pipe(v.nullable(v.string()), d("`admin`, a principal, or null (refused).")),
        tokenId: v.pipe(v.nullable(v.string()), d("The principal's token id; never the token.")),
        action: v.pipe(v.string(), d("Method and route.")),
        workload: v.pipe(v.nullable(v.string()), d("The workload named in the path, if any.")),
        status: v.pipe(v.number(), d("The HTTP status answered.")),
        peer: v.pipe(v.string(), d("`unix` or the TCP client's address.")),
      }),
    ),
    d("Oldest first."),
  ),
});

export function createAuditRoutes(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();
  app.get("/v1/audit", function audit(c) {
    const query = parseWith(AuditQuerySchema, c.req.query());
    const audit = deps.audit;
    if (audit === undefined) {
      throw conflict("audit-disabled", "No audit log", "this daemon keeps no audit log");
    }
    const limit = query.limit === undefined ? 1000 : Number(query.limit);
    if (limit < 1 || limit > 10_000) {
      throw validationFailed([{ path: "limit", message: "must be from 1 to 10000" }]);
    }
    const items = audit.read({
      limit,
      ...(query.since !== undefined ? { sinceMs: Date.parse(query.since) } : {}),
      ...(query.principal !== undefined ? { principal: query.principal } : {}),
    });
    return c.json({ items });
  });
  return app;
}
