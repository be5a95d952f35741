/** @jsxImportSource hono/jsx */
/**
 * The /ui pages, server-rendered from the same deps as the JSON API and served on the same
 * listeners. Read-only but for cancel (a POST carrying a CSRF token). The app-wide bearer
 * check skips /ui; every handler here asks `uiCaller` instead (cookie over TCP, none on the
 * unix socket), and the cookie is honoured nowhere but under /ui.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { JSX } from "hono/jsx/jsx-runtime";
import {
  countLiveWorkloadsByProfile,
  isUnreadable,
  listEvents,
  listPrincipals,
  listWorkloadIds,
  listWorkloadPage,
  readWorkloadDetailsByIds,
  requestStop,
  type WorkloadKey,
  workloadOwner,
} from "../../../adapters/store-sqlite/index.ts";
import { PHASES, type Phase, WORKLOAD_KINDS, type WorkloadKind } from "../../../core/models.ts";
import { batchRefusal, sessionIsolationVerdict } from "../../../core/ports/allocation-backend.ts";
import { type Caller, listScope } from "../../../core/principals.ts";
import { eventFor, workloadFor } from "../../../core/scheduler-words.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError } from "../problem.ts";
import { breakerStates, profileDegradedView } from "../profiles/profile-view.ts";
import { placement } from "../profiles/routes.ts";
import { readBackendHealth } from "../system/backend-health.ts";
import { createLogRoutes } from "../workloads/logs.ts";
import { ClusterPage } from "./cluster-page.tsx";
import { LoginPage } from "./login-page.tsx";
import { SessionsPage } from "./sessions-page.tsx";
import {
  contentSecurityPolicy,
  csrfValid,
  mintLogin,
  newNonce,
  newUiKeys,
  UI_COOKIE,
  UI_LOGIN_SECONDS,
  type UiKeys,
  uiCaller,
} from "./ui-auth.ts";
import { stillSignedIn, uiSignIn } from "./ui-sign-in.ts";
import { WorkloadPage } from "./workload-page.tsx";
import { ADMIN_OWNER_OPTION, WorkloadsPage } from "./workloads-page.tsx";

type Ctx = Context<ApiEnv>;

const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d2733"/><circle cx="8" cy="8" r="4" fill="#5fb0ff"/></svg>';

/** Rows per list page: a screenful an admin scans without scrolling far. */
const PAGE_ROWS = 50;

/** Every /ui answer: no caching, no framing, no sniffing, no referrer leaving the origin, this nonce only. */
function secure(response: Response, nonce: string): Response {
  const h = response.headers;
  h.set("Content-Security-Policy", contentSecurityPolicy(nonce));
  h.set("X-Content-Type-Options", "nosniff");
  h.set("X-Frame-Options", "DENY");
  // same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with a
  // form POST, and the origin check below could not tell our own form from a sandboxed one.
  h.set("Referrer-Policy", "same-origin");
  h.set("Cache-Control", "no-store");
  return response;
}

function page(c: Ctx, render: (nonce: string) => JSX.Element, status = 200): Response {
  const nonce = newNonce();
  const body = `<!DOCTYPE html>${render(nonce).toString()}`;
  return secure(c.html(body, status as 200), nonce);
}

function plain(c: Ctx, text: string, status: 200 | 400 | 403 | 404): Response {
  return secure(c.text(text, status), newNonce());
}

function redirect(c: Ctx, to: string): Response {
  return secure(c.redirect(to, 303), newNonce());
}

/** Under TLS (here or at a proxy in front) the cookie must never travel in clear. */
function overTls(c: Ctx): boolean {
  return new URL(c.req.url).protocol === "https:" || c.req.header("x-forwarded-proto") === "https";
}

/** A POST from a page of another origin is refused before its CSRF token is even read. */
function sameOrigin(c: Ctx): boolean {
  const origin = c.req.header("origin");
  if (origin === undefined || origin === "null") return origin === undefined;
  // The request URL's host is the Host header the browser sent (Bun may not repeat it
  // among the headers).
  const host = new URL(c.req.url).host;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** A login or cancel form is a few hundred bytes: anything far larger is not ours. */
const MAX_FORM_BYTES = 16 * 1024;

/** The form's fields, or null when the body is too large to be one of these pages' forms. */
async function readForm(c: Ctx): Promise<URLSearchParams | null> {
  if (Number(c.req.header("content-length") ?? "0") > MAX_FORM_BYTES) return null;
  const text = await c.req.text();
  if (Buffer.byteLength(text) > MAX_FORM_BYTES) return null;
  return new URLSearchParams(text);
}

function tooLarge(c: Ctx): Response {
  return secure(c.text(`refused: a form body is at most ${MAX_FORM_BYTES} bytes`, 413), newNonce());
}

function parseKey(text: string | undefined): WorkloadKey | undefined | null {
  if (text === undefined || text === "") return undefined;
  const match = /^(\d{1,15})\.([A-Za-z0-9_.:-]{1,200})$/.exec(text);
  if (!match?.[1] || !match[2]) return null;
  return { createdAt: Number(match[1]), id: match[2] };
}

export function createUiRoutes(deps: ApiDeps, keys: UiKeys = newUiKeys()) {
  const app = new Hono<ApiEnv>();
  const logs = createLogRoutes(deps);
  logs.onError((error) => {
    if (error instanceof ApiError)
      return new Response(error.body().detail, { status: error.status });
    deps.log.error("ui log stream failed", { error: String(error) });
    return new Response("log unavailable", { status: 500 });
  });
  // Neither the health watch nor the isolation verifier keeps a time: "since" is when these
  // pages first saw the state they show.
  let health: { readonly healthy: boolean; readonly sinceMs: number } | null = null;
  let verdict: { readonly text: string; readonly sinceMs: number } | null = null;

  /** The caller and its CSRF token, or the answer that turns them away. */
  function admit(
    c: Ctx,
  ): { csrf: string; logoutCsrf: string | undefined; caller: Caller } | Response {
    const access = (c.env as ApiEnv["Bindings"] | undefined)?.access;
    const caller = uiCaller(keys, access, getCookie(c, UI_COOKIE), deps.clock.now());
    switch (caller.kind) {
      case "Allowed":
        // A principal's login ends with its token or its principal, not 12 hours later.
        if (!stillSignedIn(deps, caller.caller)) return redirect(c, "/ui/login");
        return {
          csrf: caller.csrf,
          logoutCsrf: access?.kind === "Bearer" ? caller.csrf : undefined,
          caller: caller.caller,
        };
      case "NeedsLogin":
        return redirect(c, "/ui/login");
      case "Refused":
        return plain(c, "this listener does not accept requests", 403);
      default: {
        const never: never = caller;
        throw new Error(`unhandled caller ${JSON.stringify(never)}`);
      }
    }
  }

  /** A state-changing form: admitted, same origin, and carrying this caller's CSRF token. */
  async function admitPost(c: Ctx): Promise<Response | Caller> {
    const admitted = admit(c);
    if (admitted instanceof Response) return admitted;
    const form = await readForm(c);
    if (form === null) return tooLarge(c);
    if (!sameOrigin(c) || !csrfValid(admitted.csrf, form.get("csrf") ?? undefined)) {
      return plain(c, "refused: the form's CSRF token is missing or stale; reload the page", 403);
    }
    return admitted.caller;
  }

  /**
   * A workload a principal may not see answers as one that does not exist (as the API's
   * refuseForeign does): its existence is not leaked.
   */
  function foreign(caller: Caller, id: string): boolean {
    return caller.kind === "Principal" && workloadOwner(deps.store, id) !== caller.name;
  }

  app.get("/ui", (c) => redirect(c, "/ui/workloads"));

  // Public like the login form: a constant picture, nothing about this daemon.
  app.get("/ui/favicon.svg", function uiIcon(c) {
    return secure(c.body(FAVICON_SVG, 200, { "Content-Type": "image/svg+xml" }), newNonce());
  });

  app.get("/ui/login", function uiLoginForm(c) {
    return page(c, (nonce) => <LoginPage nonce={nonce} />);
  });

  app.post("/ui/login", async function uiLogin(c) {
    const access = (c.env as ApiEnv["Bindings"] | undefined)?.access;
    if (access?.kind !== "Bearer") return redirect(c, "/ui/workloads");
    if (!sameOrigin(c)) return plain(c, "refused: login from another origin", 403);
    const form = await readForm(c);
    if (form === null) return tooLarge(c);
    const token = (form.get("token") ?? "").trim();
    const signedIn = await uiSignIn(deps, access, token);
    if (signedIn.kind === "Refused") {
      return page(c, (nonce) => <LoginPage nonce={nonce} error={signedIn.message} />, 401);
    }
    const cookie = mintLogin(
      keys,
      access.token,
      deps.clock.now(),
      signedIn.caller,
      signedIn.notAfterMs,
    );
    setCookie(c, UI_COOKIE, cookie, {
      path: "/ui",
      httpOnly: true,
      sameSite: "Strict",
      secure: overTls(c),
      maxAge: UI_LOGIN_SECONDS,
    });
    return secure(c.redirect("/ui/workloads", 303), newNonce());
  });

  app.post("/ui/logout", async function uiLogout(c) {
    const refused = await admitPost(c);
    if (refused instanceof Response) return refused;
    deleteCookie(c, UI_COOKIE, { path: "/ui" });
    return secure(c.redirect("/ui/login", 303), newNonce());
  });

  app.get("/ui/workloads", function uiWorkloads(c) {
    const admitted = admit(c);
    if (admitted instanceof Response) return admitted;
    const q = c.req.query();
    const phase = q["phase"] || undefined;
    const kind = q["kind"] || undefined;
    const profile = q["profile"] || undefined;
    if (phase !== undefined && !(PHASES as readonly string[]).includes(phase)) {
      return plain(c, `phase: ${JSON.stringify(phase)} is not one of ${PHASES.join(", ")}`, 400);
    }
    if (kind !== undefined && !(WORKLOAD_KINDS as readonly string[]).includes(kind)) {
      return plain(
        c,
        `kind: ${JSON.stringify(kind)} is not one of ${WORKLOAD_KINDS.join(", ")}`,
        400,
      );
    }
    if (profile !== undefined && profile.length > 200) return plain(c, "profile: too long", 400);
    const mine = admitted.caller.kind === "Principal" ? admitted.caller.name : undefined;
    // A principal's list is its own, whatever owner the query names.
    const owner = mine ?? (q["owner"] || undefined);
    if (owner !== undefined && owner.length > 64) return plain(c, "owner: too long", 400);
    const after = parseKey(q["after"]);
    const before = parseKey(q["before"]);
    if (after === null || before === null) {
      return plain(c, "after/before: not a position these pages issued", 400);
    }
    const result = listWorkloadPage(deps.store, {
      phase: phase as Phase | undefined,
      kind: kind as WorkloadKind | undefined,
      profile,
      owner: owner === ADMIN_OWNER_OPTION ? null : owner,
      limit: PAGE_ROWS,
      after,
      before,
    });
    const profiles = deps.backend.profiles().map((p) => p.name);
    const live: Record<string, number> = {};
    for (const l of countLiveWorkloadsByProfile(deps.store)) {
      live[l.phase] = (live[l.phase] ?? 0) + l.count;
    }
    return page(c, (nonce) => (
      <WorkloadsPage
        nonce={nonce}
        logoutCsrf={admitted.logoutCsrf}
        filters={{ phase, kind, profile, owner }}
        profiles={profiles}
        owners={mine !== undefined ? [mine] : listPrincipals(deps.store).map((p) => p.name)}
        page={{
          ...result,
          items: result.items.map((w) => (isUnreadable(w) ? w : workloadFor(admitted.caller, w))),
        }}
        live={live}
        nowMs={deps.clock.now()}
      />
    ));
  });

  app.get("/ui/workloads/:id", function uiWorkload(c) {
    const admitted = admit(c);
    if (admitted instanceof Response) return admitted;
    const id = c.req.param("id");
    const read = foreign(admitted.caller, id) ? null : readWorkloadDetailsByIds(deps.store, [id]);
    // A row that does not decode is named, as the API's show names it, not a 500.
    const unreadable = read?.unreadable[0];
    if (unreadable !== undefined) {
      return plain(
        c,
        `workload ${id}: its stored record cannot be read: ${unreadable.message}`,
        200,
      );
    }
    const stored = read?.details[0] ?? null;
    if (stored === null) return plain(c, `no workload ${JSON.stringify(id)}`, 404);
    // The API's view per caller: the scheduler's words for the admin, the hidden form else.
    const details = { ...stored, workload: workloadFor(admitted.caller, stored.workload) };
    const events = listEvents(deps.store, details.workload.id).map((e) =>
      eventFor(admitted.caller, e),
    );
    return page(c, (nonce) => (
      <WorkloadPage
        nonce={nonce}
        csrf={admitted.csrf}
        logoutCsrf={admitted.logoutCsrf}
        details={details}
        events={events}
        stream={c.req.query("log") === "stderr" ? "stderr" : "stdout"}
        nowMs={deps.clock.now()}
      />
    ));
  });

  // The page's log tail: the API's own log route, reached here so the UI cookie never has
  // to be honoured under /v1.
  app.get("/ui/workloads/:id/log", async function uiLog(c) {
    const admitted = admit(c);
    if (admitted instanceof Response) return admitted;
    if (foreign(admitted.caller, c.req.param("id"))) {
      return plain(c, `no workload ${JSON.stringify(c.req.param("id"))}`, 404);
    }
    const query = new URL(c.req.url).search;
    const inner = new Request(
      `http://ui/v1/workloads/${encodeURIComponent(c.req.param("id"))}/logs${query}`,
      { signal: c.req.raw.signal },
    );
    return secure(await logs.fetch(inner, c.env), newNonce());
  });

  app.post("/ui/workloads/:id/cancel", async function uiCancel(c) {
    const caller = await admitPost(c);
    if (caller instanceof Response) return caller;
    const id = c.req.param("id");
    if (foreign(caller, id)) return plain(c, `no workload ${JSON.stringify(id)}`, 404);
    const result = requestStop(deps.store, id, "USER_CANCELLED", "cancelled by the user");
    if (result.kind === "NotFound") return plain(c, `no workload ${JSON.stringify(id)}`, 404);
    if (result.kind === "Requested") {
      deps.log.info("cancel requested", { workloadId: id, via: "ui" });
      deps.reconciler.wake();
    }
    return redirect(c, `/ui/workloads/${encodeURIComponent(id)}`);
  });

  app.get("/ui/sessions", function uiSessions(c) {
    const admitted = admit(c);
    if (admitted instanceof Response) return admitted;
    const caller = admitted.caller;
    const { ids } = listWorkloadIds(deps.store, {
      kind: "SESSION",
      limit: 200,
      ...listScope(caller),
    });
    // One row that does not decode is named on the page; it no longer makes the page a 500.
    const read = readWorkloadDetailsByIds(deps.store, ids);
    const order = new Map(ids.map((id, i) => [id, i]));
    const sessions = [...read.details].sort(
      (a, b) => (order.get(a.workload.id) ?? 0) - (order.get(b.workload.id) ?? 0),
    );
    return page(c, (nonce) => (
      <SessionsPage
        nonce={nonce}
        logoutCsrf={admitted.logoutCsrf}
        sessions={sessions}
        unreadable={read.unreadable}
        nowMs={deps.clock.now()}
      />
    ));
  });

  app.get("/ui/cluster", async function uiCluster(c) {
    const admitted = admit(c);
    if (admitted instanceof Response) return admitted;
    // Every profile's load, orphans and the scheduler's health: the admin's, as /metrics is.
    if (admitted.caller.kind === "Principal") {
      return plain(c, "the cluster page is for the admin only", 403);
    }
    const { report: backend, verdict: backendVerdict } = await readBackendHealth(deps);
    const healthy = backendVerdict.healthy;
    const nowMs = deps.clock.now();
    if (health === null || health.healthy !== healthy) health = { healthy, sinceMs: nowMs };
    const all = deps.backend.profiles();
    const isolation = all.some((p) => p.kinds.includes("SESSION"))
      ? await sessionIsolationVerdict(deps.backend)
      : null;
    const verdictText = JSON.stringify(isolation);
    if (verdict === null || verdict.text !== verdictText) {
      verdict = { text: verdictText, sinceMs: nowMs };
    }
    const rate = deps.reconciler.backendCallRate();
    const sinceMs = health.sinceMs;
    const isolationSinceMs = verdict.sinceMs;
    const history = deps.schedulerCallHistory;
    const breakers = breakerStates(deps.reconciler);
    return page(c, (nonce) => (
      <ClusterPage
        nonce={nonce}
        logoutCsrf={admitted.logoutCsrf}
        nowMs={nowMs}
        backend={backend}
        healthy={healthy}
        healthMessage={backendVerdict.message}
        healthSinceMs={sinceMs}
        callsPerSecond={rate.perSecond}
        callTotals={rate.totals}
        lastTick={deps.reconciler.lastTick()}
        isolation={isolation}
        isolationSinceMs={isolationSinceMs}
        callHistory={
          history === undefined ? null : { points: history.points(nowMs), sinceMs: history.since() }
        }
        profiles={all.map((p) => {
          // The scheduler's refusal in its own words: this page is the admin's only.
          const degraded = profileDegradedView(
            breakers.get(p.name),
            backend.profileChecks?.find((check) => check.profile === p.name),
            admitted.caller,
          );
          return {
            profile: p,
            placement: placement(p, isolation, batchRefusal(deps.backend), degraded),
            degraded,
          };
        })}
        live={countLiveWorkloadsByProfile(deps.store)}
      />
    ));
  });

  return app;
}
