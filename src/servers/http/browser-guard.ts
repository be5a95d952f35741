/**
 * No web page may drive the API. Every listener (the unix socket, forwarded by `ssh -L` to a
 * browser's localhost, and TCP) answers any request a browser can be made to send, so before
 * authentication, on every route present and future (websocket upgrades included, since they
 * arrive as requests through the same app), three refusals:
 *
 * - a `Host` that is neither a loopback name nor one the admin configured: DNS rebinding
 *   points an attacker's name at 127.0.0.1, and the browser then treats the daemon as the
 *   attacker's own origin, free to read a freshly issued token;
 * - a state-changing request or a websocket upgrade whose `Origin` is not the request's own
 *   origin nor one the admin configured, or (without an Origin) whose `Sec-Fetch-Site` says
 *   it came from another site: a page's `fetch(url, {mode: "no-cors", method: "POST"})` or
 *   `new WebSocket(url)` carries no token on the socket's forward and needs none there
 *   (Jupyter Server's `allow_origin` is the model);
 * - a state-changing body that does not say `application/json` (415): the only bodies a page
 *   may send without a CORS preflight are text/plain, forms and multipart, or untyped (a Blob).
 *   Exempt: the /ui forms (same-origin and a CSRF token, ui/routes.tsx), workspace uploads
 *   (raw bytes, and PUT, which no page sends without a preflight), and Jupyter's /api routes
 *   when a token travels in a header, because stock Jupyter clients type their JSON as
 *   text/plain and a page cannot set Authorization without a preflight.
 *
 * A client that is no browser (the CLI, curl, Python) sends no Origin and no Sec-Fetch-Site,
 * a loopback Host or a configured one, and JSON typed as JSON: it is not affected.
 */
import type { MiddlewareHandler } from "hono";
import type { ApiEnv } from "./deps.ts";
import { ApiError } from "./problem.ts";

/** What the admin allows beyond loopback (OPENAI4S_ALLOWED_HOSTS / _ORIGINS). */
export interface BrowserGuardSettings {
  /** Host names or IP literals (lower case, no port) clients may use to reach the daemon. */
  readonly allowedHosts: readonly string[];
  /** Serialized origins (`https://hub.example.org`) whose pages may change state. */
  readonly allowedOrigins: readonly string[];
}

export const LOOPBACK_ONLY: BrowserGuardSettings = { allowedHosts: [], allowedOrigins: [] };

/** The fields of a request the guard judges, so the rules are tested without a server. */
export interface GuardedRequest {
  readonly method: string;
  readonly path: string;
  /** The Host header, else the request URL's host. */
  readonly host: string;
  readonly origin: string | undefined;
  readonly secFetchSite: string | undefined;
  readonly upgrade: string | undefined;
  readonly contentType: string | undefined;
  readonly authorization: string | undefined;
  readonly hasBody: boolean;
}

export type GuardVerdict =
  | { readonly kind: "Pass" }
  | {
      readonly kind: "Refused";
      readonly status: 403 | 415;
      readonly slug: "host-refused" | "cross-site-refused" | "unsupported-media-type";
      readonly detail: string;
    };

const SAFE_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS"]);
const PASS: GuardVerdict = { kind: "Pass" };

/** `name`, `name:port`, `[v6]`, `[v6]:port` → the name, lower case, without a final dot. */
export function hostName(host: string): string | null {
  const text = host.trim().toLowerCase();
  const bracketed = /^\[([0-9a-f:.]+)\](?::[0-9]{1,5})?$/.exec(text);
  if (bracketed?.[1] !== undefined) return `[${bracketed[1]}]`;
  const plain = /^([a-z0-9._-]+?)\.?(?::[0-9]{1,5})?$/.exec(text);
  return plain?.[1] ?? null;
}

/** localhost, 127.0.0.0/8 written as a dotted quad, or [::1]. */
export function isLoopbackName(name: string): boolean {
  if (name === "localhost" || name === "[::1]" || name === "[0:0:0:0:0:0:0:1]") return true;
  const quad = /^127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$/.exec(name);
  return quad?.slice(1).every((part) => Number(part) <= 255) === true;
}

function hostAllowed(host: string, settings: BrowserGuardSettings): boolean {
  const name = hostName(host);
  if (name === null) return false;
  return isLoopbackName(name) || settings.allowedHosts.includes(name);
}

/** An origin's `scheme://host[:port]` as a URL serializes it (default ports dropped). */
function serializedOrigin(origin: string): string | null {
  try {
    const url = new URL(origin);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : null;
  } catch {
    return null;
  }
}

/** Whether `origin` names the server the request reached through `host` (either scheme). */
function sameOrigin(origin: string, host: string): boolean {
  try {
    const own = new URL(origin);
    return own.host === new URL(`${own.protocol}//${host}`).host;
  } catch {
    return false;
  }
}

function crossSite(request: GuardedRequest, settings: BrowserGuardSettings): string | null {
  const { origin, secFetchSite } = request;
  if (origin !== undefined) {
    const serialized = serializedOrigin(origin);
    if (serialized !== null && settings.allowedOrigins.includes(serialized)) return null;
    if (serialized !== null && sameOrigin(origin, request.host)) return null;
    return `Origin ${JSON.stringify(origin.slice(0, 200))} is not this server's origin nor an allowed one (OPENAI4S_ALLOWED_ORIGINS)`;
  }
  // Without an Origin, a browser's own word: `none` is the user's navigation, same-origin
  // is a page of this server; same-site is another port of this host, another origin.
  if (secFetchSite !== undefined && secFetchSite !== "same-origin" && secFetchSite !== "none") {
    return `Sec-Fetch-Site: ${secFetchSite.slice(0, 40)}: a page of another origin may not change anything here`;
  }
  return null;
}

const UPLOAD_PATH = /^\/v1\/workloads\/[^/]+\/files\/./;
const TOKEN_HEADER = /^\s*(token|bearer)\s+\S+\s*$/i;

/** A state-changing body this route reads as something other than JSON. */
function bodyNeedNotBeJson(request: GuardedRequest): boolean {
  const { path } = request;
  if (path === "/ui" || path.startsWith("/ui/")) return true;
  if (request.method === "PUT" && UPLOAD_PATH.test(path)) return true;
  const jupyter = path === "/api" || path.startsWith("/api/");
  return jupyter && TOKEN_HEADER.test(request.authorization ?? "");
}

function isJson(contentType: string | undefined): boolean {
  const media = (contentType?.split(";")[0] ?? "").trim().toLowerCase();
  return media === "application/json" || /^application\/[a-z0-9.+-]+\+json$/.test(media);
}

/** The guard's verdict on one request: the first refusal that applies, else Pass. */
export function judgeRequest(
  request: GuardedRequest,
  settings: BrowserGuardSettings,
): GuardVerdict {
  if (!hostAllowed(request.host, settings)) {
    return {
      kind: "Refused",
      status: 403,
      slug: "host-refused",
      detail: `Host ${JSON.stringify(request.host.slice(0, 200))} is not a loopback name nor an allowed host (OPENAI4S_ALLOWED_HOSTS)`,
    };
  }
  const upgrade = request.upgrade?.toLowerCase() === "websocket";
  const changes = !SAFE_METHODS.has(request.method.toUpperCase());
  if (!changes && !upgrade) return PASS;
  const why = crossSite(request, settings);
  if (why !== null)
    return { kind: "Refused", status: 403, slug: "cross-site-refused", detail: why };
  if (changes && request.hasBody && !isJson(request.contentType) && !bodyNeedNotBeJson(request)) {
    return {
      kind: "Refused",
      status: 415,
      slug: "unsupported-media-type",
      detail: `${request.method} ${request.path.slice(0, 200)} takes a JSON body: send Content-Type: application/json (got ${request.contentType === undefined ? "none" : JSON.stringify(request.contentType.slice(0, 100))})`,
    };
  }
  return PASS;
}

/** A request says it has a body: a length above zero, chunked framing, or a stream. */
function hasBody(request: Request): boolean {
  const length = request.headers.get("content-length");
  if (length !== null) return Number(length) !== 0;
  return request.headers.has("transfer-encoding") || request.body !== null;
}

/** The guard as the app's first middleware after counting and audit (app.ts). */
export function browserGuard(settings: BrowserGuardSettings): MiddlewareHandler<ApiEnv> {
  return async function refuseBrowsers(c, next) {
    const raw = c.req.raw;
    const verdict = judgeRequest(
      {
        method: raw.method,
        path: c.req.path,
        host: raw.headers.get("host") ?? new URL(raw.url).host,
        origin: raw.headers.get("origin") ?? undefined,
        secFetchSite: raw.headers.get("sec-fetch-site") ?? undefined,
        upgrade: raw.headers.get("upgrade") ?? undefined,
        contentType: raw.headers.get("content-type") ?? undefined,
        authorization: raw.headers.get("authorization") ?? undefined,
        hasBody: hasBody(raw),
      },
      settings,
    );
    if (verdict.kind === "Refused") {
      throw new ApiError({
        status: verdict.status,
        slug: verdict.slug,
        title:
          verdict.status === 415
            ? "Unsupported media type"
            : "Refused: not from this server's pages",
        detail: verdict.detail,
        ...(verdict.status === 415
          ? { errors: [{ path: "Content-Type", message: "must be application/json" }] }
          : {}),
      });
    }
    await next();
  };
}
