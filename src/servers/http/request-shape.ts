/**
 * Query parameters and bodies a route does not define are refused, never ignored, on every
 * route alike (docs/api.md): the route contract (system/contract.ts) says which query
 * parameters each route takes and whether it takes a body. A parameter given twice is
 * refused too: which of `?attempt=1&attempt=2` a server picks is a guess a client should
 * not have to make. A POST without a body schema (cancel, interrupt, backup) accepts no
 * body or `{}`; `{"destination":"/etc/x"}` to /v1/backup is a client that believes it
 * chose something, and is told it did not.
 */
import type { Context } from "hono";
import { routePath } from "hono/route";
import * as v from "valibot";
import type { ApiEnv } from "./deps.ts";
import { validationFailed } from "./problem.ts";
import { OPERATIONS } from "./system/contract.ts";
import { declaresBody, parseWith, readJson } from "./validation.ts";

interface Shape {
  readonly queryKeys: readonly string[];
  /** The route validates its query itself (strict: unknown keys named with bad values). */
  readonly validatesQuery: boolean;
  readonly takesBody: boolean;
}

/** Hono's route pattern (`/v1/workloads/:id`) for a contract path (`/v1/workloads/{id}`). */
function honoPath(contractPath: string): string {
  return contractPath.replace(/\{([^}]+)\}/g, ":$1");
}

function queryKeys(schema: v.GenericSchema | undefined): readonly string[] {
  const entries = (schema as { readonly entries?: Readonly<Record<string, unknown>> } | undefined)
    ?.entries;
  return entries === undefined ? [] : Object.keys(entries);
}

const SHAPES: ReadonlyMap<string, Shape> = new Map(
  OPERATIONS.map((op) => [
    `${op.method} ${honoPath(op.path)}`,
    {
      queryKeys: queryKeys(op.query?.schema),
      validatesQuery: op.query !== undefined,
      takesBody: op.body !== undefined,
    },
  ]),
);

const NO_BODY = v.strictObject({});

/** Throws a 400 naming every unknown or repeated parameter, or an unexpected body field. */
export async function checkRequestShape(c: Context<ApiEnv>): Promise<void> {
  // HEAD is answered by the GET route.
  const method = c.req.method === "HEAD" ? "GET" : c.req.method;
  // `:path{.+}` is the contract's `{path}`: the pattern is Hono's, not part of the name.
  const route = routePath(c, -1).replace(/(:[A-Za-z]+)\{[^}]*\}/g, "$1");
  const shape = SHAPES.get(`${method} ${route}`);
  // No route: the 404/405 handlers answer, with nothing to check here.
  if (shape === undefined) return;
  const errors: { path: string; message: string }[] = [];
  for (const [key, values] of Object.entries(c.req.queries())) {
    if (!shape.queryKeys.includes(key)) {
      // Named by the route's own schema, together with any invalid value.
      if (shape.validatesQuery) continue;
      const known = shape.queryKeys.length === 0 ? "none" : shape.queryKeys.join(", ");
      errors.push({ path: key, message: `unknown query parameter "${key}" (known: ${known})` });
    } else if (values.length > 1) {
      errors.push({ path: key, message: `query parameter "${key}" is given more than once` });
    }
  }
  if (errors.length > 0) throw validationFailed(errors);
  if (!shape.takesBody && method === "POST" && declaresBody(c.req.raw)) {
    parseWith(NO_BODY, await readJson(c, { emptyIsNone: true }));
  }
}
