/**
 * The client's one way to the daemon: a request function that turns transport failures
 * and problem+json answers into values (never a throw for a refused or unreachable call),
 * plus the streamed variants for job output, backups and event streams.
 */
import { ConnectionLost } from "../../lib/command/command.ts";

/** Where the client looks for the daemon's address when no --server is given. */
export const SERVER_ENV = "OPENAI4S_SERVER";

export type ServerAddress =
  | { readonly kind: "unix"; readonly path: string }
  | { readonly kind: "http"; readonly baseUrl: string };

/** How a request reaches the daemon (`fetch`, with Bun's `unix` option for a socket). */
export type ClientFetch = (url: string, init: RequestInit & { unix?: string }) => Promise<Response>;

/** An answer read whole: what the client needs of it, in fetch's names. */
export interface WholeAnswer {
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  /** Names lower-cased; a repeated header's values joined with ", ", as Headers does. */
  readonly headers: ReadonlyMap<string, string>;
  /** The body decoded as UTF-8 (invalid sequences replaced, as Response.text() does). */
  readonly text: string;
}

/**
 * A request whose answer is read whole. Rejects as fetch does, with its codes: ENOENT or
 * ECONNREFUSED when nothing was reached, ECONNRESET for an answer cut short.
 */
export type WholeFetch = (
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; unix?: string },
) => Promise<WholeAnswer>;

export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly errors?: readonly { readonly path: string; readonly message: string }[];
  readonly reason?: string;
}

export type ApiResult<T> =
  | { readonly kind: "Ok"; readonly status: number; readonly body: T }
  | { readonly kind: "Problem"; readonly status: number; readonly problem: Problem }
  /** No HTTP answer at all: the daemon is not running, the socket is wrong, a proxy died. */
  | {
      readonly kind: "Unreachable";
      readonly message: string;
      /**
       * Nothing was there to connect to (no socket file, connection refused): the request
       * was never delivered, so another address may be tried with it.
       */
      readonly neverConnected?: boolean;
    };

export type StreamResult =
  | {
      readonly kind: "Ok";
      readonly status: number;
      readonly body: ReadableStream<Uint8Array>;
      readonly headers: Headers;
    }
  | Exclude<ApiResult<never>, { readonly kind: "Ok" }>;

export interface ApiClient {
  readonly server: ServerAddress;
  request<T>(
    method: "GET" | "POST" | "DELETE",
    path: string,
    options?: { readonly body?: unknown; readonly headers?: Readonly<Record<string, string>> },
  ): Promise<ApiResult<T>>;
  /**
   * As `request`, but a success is the Response itself, its body unread: for answers that
   * stream (server-sent events). Failures are read and returned as problems, as `request` does.
   */
  open(
    method: "GET" | "POST" | "DELETE",
    path: string,
    options?: { readonly body?: unknown; readonly headers?: Readonly<Record<string, string>> },
  ): Promise<ApiResult<Response>>;
  /** A request whose successful body is streamed (job output, a backup), not parsed. */
  stream(path: string, method?: "GET" | "POST"): Promise<StreamResult>;
  /** A raw body (a file, streamed by the runtime) sent with `method`; the answer parsed. */
  send<T>(method: "PUT" | "DELETE", path: string, body: Blob | null): Promise<ApiResult<T>>;
}

function describeServer(server: ServerAddress): string {
  return server.kind === "unix" ? `unix:${server.path}` : server.baseUrl;
}

export function createClient(
  server: ServerAddress,
  token: string | null,
  runtime: {
    readonly fetch: ClientFetch;
    /**
     * For an answer read whole (`request`, and `send` with no file): a lighter fetch that
     * serves unix sockets and http: only (http1-fetch.ts). Streamed answers, uploads and
     * https go through `fetch`.
     */
    readonly fetchWhole?: WholeFetch;
  },
  /** With no token: each request's `Authorization` made fresh (a MUNGE credential). */
  sign?: (method: string, path: string, server: ServerAddress) => Promise<string>,
): ApiClient {
  async function headersFor(
    method: string,
    path: string,
    options: RequestOptions,
  ): Promise<{ readonly kind: "Headers"; readonly headers: Record<string, string> } | Unreachable> {
    const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
    if (token !== null) headers["Authorization"] = `Bearer ${token}`;
    else if (sign !== undefined) {
      try {
        headers["Authorization"] = await sign(method, path, server);
      } catch (error) {
        return { kind: "Unreachable", message: (error as Error).message };
      }
    }
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    if (options.raw !== undefined) headers["Content-Type"] = "application/octet-stream";
    return { kind: "Headers", headers };
  }

  // Over a unix socket the host part is a formality; the path is what routes.
  const urlOf = (path: string) =>
    `${server.kind === "unix" ? "http://localhost" : server.baseUrl}${path}`;
  const unix = server.kind === "unix" ? { unix: server.path } : {};

  /** A request whose answer is streamed or sent raw: through fetch. */
  async function send(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    options: RequestOptions,
  ): Promise<Response | Unreachable> {
    const made = await headersFor(method, path, options);
    if (made.kind === "Unreachable") return made;
    const init: RequestInit & { unix?: string } = {
      method,
      headers: made.headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      ...(options.raw !== undefined ? { body: options.raw } : {}),
      ...unix,
    };
    try {
      return await runtime.fetch(urlOf(path), init);
    } catch (error) {
      return unreachable(server, error, false);
    }
  }

  /**
   * A request whose answer is read whole: through the lighter fetchWhole where it serves
   * (unix sockets and http:, no raw body), else fetch with its body read here.
   */
  async function sendWhole(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    options: RequestOptions,
  ): Promise<WholeAnswer | Unreachable> {
    const url = urlOf(path);
    const whole = runtime.fetchWhole;
    if (whole === undefined || options.raw !== undefined || !url.startsWith("http:")) {
      const response = await send(method, path, options);
      return response instanceof Response ? readWhole(response, server) : response;
    }
    const made = await headersFor(method, path, options);
    if (made.kind === "Unreachable") return made;
    const body = options.body !== undefined ? { body: JSON.stringify(options.body) } : {};
    try {
      return await whole(url, { method, headers: made.headers, ...body, ...unix });
    } catch (error) {
      return unreachable(server, error, true);
    }
  }

  async function parsed<T>(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    options: RequestOptions,
  ): Promise<ApiResult<T>> {
    const answer = await sendWhole(method, path, options);
    if ("kind" in answer) return answer;
    let body: unknown;
    try {
      body = answer.text === "" ? null : JSON.parse(answer.text);
    } catch {
      body = null;
    }
    if (answer.ok) return { kind: "Ok", status: answer.status, body: body as T };
    return toProblem(answer, body);
  }

  return {
    server,
    send<T>(method: "PUT" | "DELETE", path: string, body: Blob | null) {
      return parsed<T>(method, path, body === null ? {} : { raw: body });
    },
    async request<T>(
      method: "GET" | "POST" | "DELETE",
      path: string,
      options: RequestOptions = {},
    ): Promise<ApiResult<T>> {
      return parsed<T>(method, path, options);
    },
    async open(method: "GET" | "POST", path: string, options: RequestOptions = {}) {
      const response = await send(method, path, options);
      if (!(response instanceof Response)) return response;
      if (response.ok) {
        const body = response.body === null ? null : guarded(response.body, server);
        return { kind: "Ok", status: response.status, body: new Response(body, response) };
      }
      return readProblem(response, server);
    },
    async stream(path: string, method: "GET" | "POST" = "GET") {
      const response = await send(method, path, {});
      if (!(response instanceof Response)) return response;
      if (response.ok && response.body !== null) {
        return {
          kind: "Ok",
          status: response.status,
          body: guarded(response.body, server),
          headers: response.headers,
        };
      }
      return readProblem(response, server);
    },
  };
}

type Unreachable = Extract<ApiResult<never>, { readonly kind: "Unreachable" }>;

/**
 * No answer: the request failed to connect, or (`whole`) its answer, read in the same call,
 * was cut off mid-way, which is said as fetch's reading of a body would have it.
 */
function unreachable(server: ServerAddress, error: unknown, whole: boolean): Unreachable {
  const code = (error as { readonly code?: unknown } | null)?.code;
  const lost = whole && code === "ECONNRESET";
  return {
    kind: "Unreachable",
    message: lost ? lostMessage(server, error) : unreachableMessage(server, error),
    neverConnected: code === "ENOENT" || code === "ECONNREFUSED",
  };
}

type RequestOptions = {
  readonly body?: unknown;
  /** A raw body (an upload): Bun streams a file-backed Blob from disk. */
  readonly raw?: Blob;
  readonly headers?: Readonly<Record<string, string>>;
};

/** The message for an answer cut off mid-way. */
function lostMessage(server: ServerAddress, error: unknown): string {
  const code = (error as { readonly code?: unknown } | null)?.code;
  return `the connection to the daemon at ${describeServer(server)} was lost before its answer was complete${typeof code === "string" ? ` (${code})` : ""}; it may have stopped or restarted`;
}

/** A fetch answer read whole, or Unreachable when the connection dropped mid-body. */
async function readWhole(
  response: Response,
  server: ServerAddress,
): Promise<WholeAnswer | Unreachable> {
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    return { kind: "Unreachable", message: lostMessage(server, error) };
  }
  const { status, statusText, ok } = response;
  return { status, statusText, ok, headers: new Map(response.headers), text };
}

/**
 * A streamed answer whose read error, when the connection drops, is a ConnectionLost (one
 * line, exit 1) instead of the runtime's TypeError, which crashed the command with a
 * source listing.
 */
function guarded(
  body: ReadableStream<Uint8Array>,
  server: ServerAddress,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        throw new ConnectionLost(lostMessage(server, error));
      }
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/** A failed answer's body as a problem (JSON when it is JSON, else its text). */
async function readProblem(response: Response, server: ServerAddress) {
  const answer = await readWhole(response, server);
  if ("kind" in answer) return answer;
  let body: unknown = null;
  try {
    body = JSON.parse(answer.text);
  } catch {}
  return toProblem(answer, body);
}

function toProblem(
  answer: WholeAnswer,
  body: unknown,
): { readonly kind: "Problem"; readonly status: number; readonly problem: Problem } {
  if (isProblem(body)) return { kind: "Problem", status: answer.status, problem: body };
  return {
    kind: "Problem",
    status: answer.status,
    problem: {
      type: "about:blank",
      title: answer.statusText || "Error",
      status: answer.status,
      detail: answer.text.slice(0, 500) || `HTTP ${answer.status}`,
    },
  };
}

/**
 * No HTTP answer. The usual cause over a unix socket is a daemon that is not running there
 * (no socket file, or a stale one nobody listens on): say that, and how to point the client
 * elsewhere, instead of the runtime's guess about typos in a URL.
 */
function unreachableMessage(server: ServerAddress, error: unknown): string {
  const code = (error as { readonly code?: unknown } | null)?.code;
  const where = describeServer(server);
  if (server.kind === "unix" && (code === "ENOENT" || code === "ECONNREFUSED")) {
    return `no daemon is running at ${where} (point at the daemon with --server unix:PATH or $${SERVER_ENV})`;
  }
  if (server.kind === "http" && code === "ECONNREFUSED") {
    return `no daemon is listening at ${where} (check --server or $${SERVER_ENV})`;
  }
  return `cannot reach the daemon at ${where}: ${(error as Error).message}`;
}

function isProblem(body: unknown): body is Problem {
  if (body === null || typeof body !== "object") return false;
  const b = body as Record<string, unknown>;
  return typeof b["title"] === "string" && typeof b["status"] === "number";
}
