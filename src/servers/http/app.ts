/**
 * The admin API: one Hono app built from injected deps. Feature folders contribute routes;
 * this file owns what is common to all of them: authentication per listener, the single
 * mapping of errors to problem+json, 404s, and request counting.
 */
import { Hono } from "hono";
import { routePath } from "hono/route";
import { createDaemonMetrics, httpKey } from "../../adapters/metrics/daemon-metrics.ts";
import { type Caller, mayUse } from "../../core/principals.ts";
import { type AccessCache, createAccessCache } from "./access-cache.ts";
import { authorize } from "./auth.ts";
import { browserGuard, LOOPBACK_ONLY } from "./browser-guard.ts";
import type { ApiBindings, ApiDeps, ApiEnv } from "./deps.ts";
import { workloadIdOf } from "./jupyter/ids.ts";
import { createJupyterRoutes } from "./jupyter/routes.ts";
import { createMcpRoutes } from "./mcp/index.ts";
import { outOfSpaceProblem } from "./out-of-space.ts";
import { createPrincipalRoutes } from "./principals/routes.ts";
import {
  ApiError,
  clientClosedRequest,
  internalError,
  isClientAbort,
  notFound,
  PROBLEM_CONTENT_TYPE,
} from "./problem.ts";
import { createProfileRoutes } from "./profiles/routes.ts";
import { checkRequestShape } from "./request-shape.ts";
import { siteCaller } from "./site-sign-in.ts";
import { createAuditRoutes } from "./system/audit.ts";
import { createBackupRoutes } from "./system/backup.ts";
import { createRequestCounter } from "./system/exposition.ts";
import { createSystemRoutes } from "./system/routes.ts";
import { createUiRoutes } from "./ui/routes.tsx";
import { createFileRoutes } from "./workloads/files.ts";
import { createLogRoutes } from "./workloads/logs.ts";
import { createWorkloadRoutes } from "./workloads/routes.ts";

const KNOWN_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
]);

/**
 * The method as a label value: any client, before authentication, may send any token as a
 * method, and each distinct one would be a series kept for the process's life.
 */
function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : "other";
}

/** Routes only the admin may call: they show or change more than one principal's work. */
const ADMIN_ONLY = /^\/(v1\/(principals|tokens|backup|diagnostics|audit)|metrics)(\/|$)/;

/** `/v1/workloads/{id}` and everything beneath it: the workload's id, decoded. */
const WORKLOAD_PATH = /^\/v1\/workloads\/([^/]+)/;
/** `/api/kernels/{kernel id}` and beneath it (Jupyter's API): a workload under another name. */
const KERNEL_PATH = /^\/api\/kernels\/([^/]+)/;

/**
 * Before any route runs, for a principal: an admin-only route answers 403, and another's
 * workload (under every route beneath /v1/workloads/{id}, present and future) answers the
 * same 404 as a workload that does not exist, so existence is not leaked.
 */
function refuseForeign(access: AccessCache, method: string, path: string, caller: Caller): void {
  if (ADMIN_ONLY.test(path)) {
    throw new ApiError({
      status: 403,
      slug: "forbidden",
      title: "Forbidden",
      detail: `${method} ${path} is for the admin only`,
    });
  }
  const kernel = KERNEL_PATH.exec(path)?.[1];
  const match = WORKLOAD_PATH.exec(path);
  if (!match?.[1] && kernel === undefined) return;
  let id = match?.[1] ?? kernel ?? "";
  if (id.includes("%")) {
    try {
      id = decodeURIComponent(id);
    } catch {
      // Not valid percent-encoding: looked up as written, which finds nothing.
    }
  }
  if (kernel !== undefined) id = workloadIdOf(id);
  if (!mayUse(caller, access.owner(id))) throw notFound(`no workload ${JSON.stringify(id)}`);
}

/**
 * Jupyter clients send `Authorization: token T`, or `?token=T` where they cannot set a header
 * (a browser's websocket). Both are honoured under /api/ only, read as the bearer token
 * they are: a token in a URL lands in proxies' logs, so the rest of the API keeps to headers.
 */
function jupyterAuthorization(
  path: string,
  header: string | undefined,
  url: string,
): string | undefined {
  if (!path.startsWith("/api/") && path !== "/api") return header;
  const scheme = /^\s*token\s+(\S+)\s*$/i.exec(header ?? "");
  if (scheme) return `Bearer ${scheme[1]}`;
  if (header !== undefined) return header;
  const query = new URL(url).searchParams.get("token");
  return query ? `Bearer ${query}` : undefined;
}

/** A site's credential (OIDC token, MUNGE) when the daemon takes them; null: none presented. */
function signInThroughSite(
  deps: ApiDeps,
  listener: ApiBindings["access"] | undefined,
  authorization: string | undefined,
  req: { readonly method: string; readonly url: string; header(name: string): string | undefined },
): Promise<Caller | null> | null {
  const identity = deps.siteIdentity;
  if (identity === undefined) return null;
  const url = new URL(req.url);
  return siteCaller(
    { identity, store: deps.store, defaults: deps.principalDefaults, log: deps.log },
    listener,
    authorization,
    { method: req.method, path: url.pathname + url.search, host: req.header("host") },
  );
}

function problemResponse(error: ApiError): Response {
  return new Response(JSON.stringify(error.body()), {
    status: error.status,
    headers: {
      "Content-Type": PROBLEM_CONTENT_TYPE,
      ...(error.status === 401 ? { "WWW-Authenticate": 'Bearer realm="openai4s"' } : {}),
      // The body was not read to its end (too slow, too large): the connection cannot carry
      // another request, and keeping it would let a stalled client hold it open.
      ...(error.status === 408 || error.status === 413 ? { Connection: "close" } : {}),
    },
  });
}

/**
 * The methods routed for a path, from the app's own route table: a client that used the
 * wrong verb on a real resource is told so (405 with Allow), not that the resource does not
 * exist, which sends it hunting for a typo in the URL.
 */
function allowedMethods(
  routes: readonly { readonly method: string; readonly path: string }[],
): (path: string) => readonly string[] {
  const table = routes
    .filter((r) => r.method !== "ALL" && !r.path.includes("*"))
    .map((r) => {
      const source = r.path
        .split("/")
        .map((part) =>
          // `:path{.+}` spans components (a workspace file's path).
          part.startsWith(":")
            ? part.endsWith("{.+}")
              ? ".+"
              : "[^/]+"
            : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"),
        )
        .join("/");
      return { method: r.method, pattern: new RegExp(`^${source}$`) };
    });
  return (path) =>
    [...new Set(table.filter((r) => r.pattern.test(path)).map((r) => r.method))].sort();
}

export function createApp(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();
  const requests = createRequestCounter();
  const metrics = deps.metrics ?? createDaemonMetrics();
  const access = createAccessCache(deps.store);

  app.use("*", async function injectTimers(c, next) {
    c.set("apiTimers", deps.timers);
    await next();
  });

  app.use("*", async function countRequests(c, next) {
    const t0 = performance.now();
    await next();
    // The route pattern, not the URL: ids must not become label values (unbounded series).
    // Index -1 is the route that would handle the request, even when an earlier
    // middleware (authentication) answered instead; a wildcard means no route matched.
    const matched = routePath(c, -1);
    const route = matched === "*" || matched === "/*" ? "unmatched" : matched;
    const method = methodLabel(c.req.method);
    requests.count(method, route, c.res.status);
    metrics.httpDuration.get(httpKey(method, route)).observe((performance.now() - t0) / 1000);
  });

  app.use("*", async function recordAudit(c, next) {
    await next();
    const audit = deps.audit;
    const method = c.req.method;
    if (audit === undefined || method === "GET" || method === "HEAD" || method === "OPTIONS") {
      return;
    }
    // An MCP message answered is audited by the tool it called (mcp/server.ts), not as POST /mcp.
    if (c.req.path === "/mcp" && c.res.status < 300) return;
    const caller = c.get("caller") as Caller | undefined;
    const matched = routePath(c, -1);
    const workload = WORKLOAD_PATH.exec(c.req.path)?.[1] ?? c.get("createdWorkload") ?? null;
    const bindings = c.env as ApiEnv["Bindings"] | undefined;
    try {
      audit.append({
        at: new Date(deps.clock.now()).toISOString(),
        principal: caller === undefined ? null : caller.kind === "Admin" ? "admin" : caller.name,
        tokenId: caller?.kind === "Principal" ? caller.tokenId : null,
        action: `${method} ${matched === "*" || matched === "/*" ? c.req.path.slice(0, 200) : matched}`,
        workload: workload === null ? null : workload.slice(0, 200),
        status: c.res.status,
        peer: bindings?.peerOf?.(c.req.raw) ?? "unix",
      });
    } catch (error) {
      // The request was already done; a full disk must not turn its answer into a 500.
      deps.log.error("audit log write failed", { error: String(error) });
    }
  });

  // Before authentication, on every route and websocket upgrade (browser-guard.ts).
  app.use("*", browserGuard(deps.browserGuard ?? LOOPBACK_ONLY));

  app.use("*", async function authenticate(c, next) {
    // `c.env` is undefined when a caller passed no bindings at all.
    const bindings = c.env as ApiEnv["Bindings"] | undefined;
    // The pages answer for themselves (ui/routes.tsx): a browser cannot send the bearer
    // header, so they take a login cookie instead, honoured only under /ui.
    if (c.req.path === "/ui" || c.req.path.startsWith("/ui/")) return next();
    // Liveness for a load balancer's probe, which has no token: `{"status":"ok"}` and
    // nothing else (no version, no counts). Every other route, and every other method on
    // this one, still needs the token.
    const liveness =
      c.req.path === "/healthz" && (c.req.method === "GET" || c.req.method === "HEAD");
    if (!liveness || bindings === undefined) {
      const authorization = jupyterAuthorization(
        c.req.path,
        c.req.header("authorization"),
        c.req.url,
      );
      const caller =
        (await signInThroughSite(deps, bindings?.access, authorization, c.req)) ??
        authorize(bindings?.access, authorization, (id) => access.token(id), deps.clock.now());
      c.set("caller", caller);
      if (caller.kind === "Principal") refuseForeign(access, c.req.method, c.req.path, caller);
    }
    await next();
  });

  app.use("*", async function refuseUnknownInput(c, next) {
    await checkRequestShape(c);
    await next();
  });

  app.route("/", createSystemRoutes(deps, requests, metrics));
  app.route("/", createProfileRoutes(deps));
  app.route("/", createWorkloadRoutes(deps));
  app.route("/", createLogRoutes(deps));
  app.route("/", createFileRoutes(deps));
  app.route("/", createBackupRoutes(deps, metrics));
  app.route("/", createUiRoutes(deps));
  app.route("/", createPrincipalRoutes(deps, access));
  app.route("/", createAuditRoutes(deps));
  app.route("/", createJupyterRoutes(deps).app);
  app.route("/", createMcpRoutes(deps));

  // Read lazily: app.routes is complete only once every feature folder was mounted.
  let allowed: ((path: string) => readonly string[]) | null = null;
  app.notFound(function unknownRoute(c) {
    allowed ??= allowedMethods(app.routes);
    const methods = allowed(c.req.path);
    if (methods.length > 0) {
      const response = problemResponse(
        new ApiError({
          status: 405,
          slug: "method-not-allowed",
          title: "Method not allowed",
          detail: `${c.req.method} is not allowed on ${c.req.path}; allowed: ${methods.join(", ")}`,
        }),
      );
      response.headers.set("Allow", methods.join(", "));
      return response;
    }
    return problemResponse(notFound(`no route ${c.req.method} ${c.req.path}`));
  });

  app.onError(function toProblem(error, c) {
    if (error instanceof ApiError) return problemResponse(error);
    // A client that left mid-body (or whose chunked framing the runtime refused) makes the
    // body read throw an AbortError with an empty message: not the daemon's failure, so no
    // 5xx in the metrics an admin alerts on and no "request failed" line.
    if (isClientAbort(error, c.req.raw)) {
      deps.log.debug("client closed the request", { method: c.req.method, path: c.req.path });
      return problemResponse(clientClosedRequest());
    }
    const full = outOfSpaceProblem(error, deps, deps.log, c.req);
    if (full !== null) return problemResponse(full);
    deps.log.error("request failed", {
      method: c.req.method,
      path: c.req.path,
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
    return problemResponse(internalError());
  });

  return app;
}

export type App = ReturnType<typeof createApp>;
