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
    readonly fetchWhole?: ClientFetch;
  },
  /** With no token: each request's `Authorization` made fresh (a MUNGE credential). */
  sign?: (method: string, path: string, server: ServerAddress) => Promise<string>,
): ApiClient {
  async function send(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    options: RequestOptions,
    whole = false,
  ): Promise<Response | Extract<ApiResult<never>, { readonly kind: "Unreachable" }>> {
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
    const init: RequestInit & { unix?: string } = {
      method,
      headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      ...(options.raw !== undefined ? { body: options.raw } : {}),
      ...(server.kind === "unix" ? { unix: server.path } : {}),
    };
    // Over a unix socket the host part is a formality; the path is what routes.
    const url = `${server.kind === "unix" ? "http://localhost" : server.baseUrl}${path}`;
    const light = whole && options.raw === undefined && url.startsWith("http:");
    const viaFetch = light ? (runtime.fetchWhole ?? runtime.fetch) : runtime.fetch;
    try {
      return await viaFetch(url, init);
    } catch (error) {
      const code = (error as { readonly code?: unknown } | null)?.code;
      // The whole-answer fetch reads the body too: an answer cut off mid-way fails here,
      // and is said as fetch's reading of a body would have it (readText).
      const lost = light && code === "ECONNRESET";
      return {
        kind: "Unreachable",
        message: lost ? lostMessage(server, error) : unreachableMessage(server, error),
        neverConnected: code === "ENOENT" || code === "ECONNREFUSED",
      };
    }
  }

  async function parsed<T>(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    options: RequestOptions,
  ): Promise<ApiResult<T>> {
    const response = await send(method, path, options, true);
    if (!(response instanceof Response)) return response;
    const text = await readText(response, server);
    if (typeof text !== "string") return text;
    let body: unknown;
    try {
      body = text === "" ? null : JSON.parse(text);
    } catch {
      body = null;
    }
    if (response.ok) return { kind: "Ok", status: response.status, body: body as T };
    return toProblem(response, text, body);
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

/** A whole answer as text, or Unreachable when the connection dropped mid-body. */
async function readText(
  response: Response,
  server: ServerAddress,
): Promise<string | { readonly kind: "Unreachable"; readonly message: string }> {
  try {
    return await response.text();
  } catch (error) {
    return { kind: "Unreachable", message: lostMessage(server, error) };
  }
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
  const text = await readText(response, server);
  if (typeof text !== "string") return text;
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {}
  return toProblem(response, text, body);
}

function toProblem(
  response: Response,
  text: string,
  body: unknown,
): { readonly kind: "Problem"; readonly status: number; readonly problem: Problem } {
  if (isProblem(body)) return { kind: "Problem", status: response.status, problem: body };
  return {
    kind: "Problem",
    status: response.status,
    problem: {
      type: "about:blank",
      title: response.statusText || "Error",
      status: response.status,
      detail: text.slice(0, 500) || `HTTP ${response.status}`,
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
