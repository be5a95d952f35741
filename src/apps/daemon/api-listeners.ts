/**
 * The API's listeners, one per `--listen`: a unix socket (0600, no idle timeout) or TCP
 * with the admin token, over TLS when the admin gave a certificate and key. Each listener says how it authenticates; shutdown closes the
 * websockets, stops accepting everywhere at once and gives requests in flight a grace period.
 */
import { readFileSync } from "node:fs";
import type { Server } from "bun";
import { withDeadline } from "../../lib/clock.ts";
import { checkPrivateFile } from "../../lib/durable-fs.ts";
import type { Access, ApiBindings } from "../../servers/http/deps.ts";
import { bunWebSocket, type SocketHandlers } from "../../servers/http/jupyter/socket.ts";
import { declaresBody } from "../../servers/http/validation.ts";
import type { Cleanup, StartFailure } from "./daemon.ts";
import { formatListenAddress, type ListenAddress, type ListenTlsPaths } from "./listen.ts";
import { removeSocket, withPrivateSocket, withUsersSocket } from "./unix-socket.ts";

export interface ListenerOptions {
  readonly listen: readonly ListenAddress[];
  /** TLS for the TCP listeners; null: plain HTTP. */
  readonly tls: ListenTlsPaths | null;
  readonly adminToken: string;
  /** The API (the Hono app's fetch), answering with the listener's bindings. */
  readonly app: { fetch(request: Request, bindings: ApiBindings): Response | Promise<Response> };
  /** Closers the API registered for daemon stop (Jupyter's websockets), run before the drain. */
  readonly beforeDrain: readonly (() => void)[];
  readonly bodyTimeoutMs: number | undefined;
  /** `serve --users-socket`: a socket every local user may open; null: none. */
  readonly usersSocket: string | null;
  readonly drainTimeoutMs: number;
  readonly maxUploadBytes: number;
}

export type Listening =
  | { readonly kind: "Listening"; readonly listening: readonly string[] }
  | StartFailure;

/** Step 7 of the start; each listener's stop and socket removal go onto `cleanups`. */
export function startListeners(options: ListenerOptions, cleanups: Cleanup[]): Listening {
  const tls = options.tls === null ? null : loadListenTls(options.tls);
  if (tls !== null && "message" in tls) return { kind: "Failed", message: tls.message };
  const servers: Server<unknown>[] = [];
  const listening: string[] = [];
  cleanups.push(async () => {
    // Websockets (Jupyter's channels) would hold the drain for its whole grace: closed first.
    for (const close of options.beforeDrain) close();
    // Stop accepting everywhere at once; in-flight requests get a grace period.
    await Promise.all(servers.map((server) => stopServer(server, options.drainTimeoutMs)));
  });
  // Bun refuses bodies past 128 MiB by default; uploads are capped by the files route
  // (streamed), JSON bodies by the API's own bound (validation.ts).
  const maxRequestBodySize = options.maxUploadBytes + 1024 * 1024;
  const users: ListenAddress[] =
    options.usersSocket === null ? [] : [{ kind: "unix", path: options.usersSocket }];
  for (const address of [...options.listen, ...users]) {
    try {
      const server = listenOn(address, options, maxRequestBodySize, tls);
      servers.push(server);
      if (address.kind === "unix") {
        cleanups.push(() => removeSocket(address.path));
        listening.push(formatListenAddress(address));
      } else {
        const port = server.port ?? address.port;
        listening.push(formatListenAddress({ kind: "tcp", host: address.host, port }));
      }
    } catch (error) {
      return {
        kind: "Failed",
        message: `cannot listen on ${formatListenAddress(address)}: ${String(error)}`,
      };
    }
  }
  return { kind: "Listening", listening };
}

function listenOn(
  address: ListenAddress,
  options: ListenerOptions,
  maxRequestBodySize: number,
  tls: PemPair | null,
): Server<SocketHandlers> {
  // Set once the listener exists: the audit log names a TCP request's client address, and
  // Jupyter's channels upgrade on the listener they arrived on.
  let server: Server<SocketHandlers> | null = null;
  const bindings: ApiBindings = {
    upgrade: (request, handlers) => server?.upgrade(request, { data: handlers }) ?? false,
    access: accessFor(address, options),
    ...(options.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: options.bodyTimeoutMs } : {}),
    ...(address.kind === "tcp"
      ? { peerOf: (request: Request) => server?.requestIP(request)?.address ?? null }
      : {}),
  };
  const fetch = async (request: Request, self: Server<SocketHandlers>) => {
    const response = closeIfBodyUnread(request, await options.app.fetch(request, bindings));
    // A streamed answer (a followed log, a streaming exec) can stay quiet for minutes while
    // the job or the cell works; Bun's 10 s idle timeout cut such streams (ECONNRESET in
    // `logs --follow`). The routes mark them the way proxies know: X-Accel-Buffering: no.
    if (response.headers.get("X-Accel-Buffering") === "no") self.timeout(request, 0);
    return response;
  };
  if (address.kind === "unix") {
    // Measured (Bun 1.4.5): the idle timeout does not cut a request still being
    // handled, but it does cut a quiet streamed answer, and `server.timeout(request, 0)`
    // has no effect on a unix socket. No idle timeout here, then: the socket is 0600,
    // only the daemon's own user can hold a connection open. A body that stops arriving
    // is still cut (the API's body deadline, then Connection: close), as on TCP.
    const born = address.path === options.usersSocket ? withUsersSocket : withPrivateSocket;
    server = born(address.path, () =>
      // Bun's types leave idleTimeout off the unix options; the runtime honours it
      // (the logs-live test fails without it).
      Bun.serve({
        unix: address.path,
        fetch,
        idleTimeout: 0,
        maxRequestBodySize,
        websocket: bunWebSocket,
      } as Parameters<typeof Bun.serve>[0]),
    ) as Server<SocketHandlers>;
    return server;
  }
  server = Bun.serve({
    hostname: address.host,
    port: address.port,
    fetch,
    maxRequestBodySize,
    websocket: bunWebSocket,
    ...(tls !== null ? { tls: { cert: tls.cert, key: tls.key } } : {}),
  });
  return server;
}

interface PemPair {
  readonly cert: string;
  readonly key: string;
}

/**
 * The admin's pair, read once at start. The key must be a private file (0600): a key any
 * local user can read lets them impersonate the daemon to every client. A certificate that
 * does not match its key makes Bun.serve throw, named as the listener's failure.
 */
function loadListenTls(paths: ListenTlsPaths): PemPair | { readonly message: string } {
  const check = checkPrivateFile(paths.keyPath);
  if (check.kind !== "Private") {
    return {
      message: `--tls-key ${paths.keyPath} is not a private file (${check.kind}; expected mode 600)`,
    };
  }
  try {
    return { cert: readFileSync(paths.certPath, "utf8"), key: readFileSync(paths.keyPath, "utf8") };
  } catch (error) {
    return { message: `cannot read the TLS certificate or key: ${String(error)}` };
  }
}

function accessFor(address: ListenAddress, options: ListenerOptions): Access {
  if (address.kind === "unix" && address.path === options.usersSocket) {
    // Open to every local user: its mode grants nothing, callers prove who they are.
    return { kind: "Bearer", token: options.adminToken, socketPath: address.path };
  }
  return address.kind === "unix"
    ? { kind: "LocalSocket" }
    : { kind: "Bearer", token: options.adminToken };
}

/**
 * A request that declared a body its route never read (a GET with Content-Length, a refusal
 * before the read): the runtime would keep the connection to drain that body, and on the
 * unix socket, which has no idle timeout, a client that never sends it holds the connection
 * forever. `Connection: close` ends it once the answer is sent.
 */
function closeIfBodyUnread(request: Request, response: Response): Response {
  if (!declaresBody(request) || request.bodyUsed) return response;
  try {
    response.headers.set("Connection", "close");
    return response;
  } catch {
    // Immutable headers (a Response built elsewhere): copy it.
    const copy = new Response(response.body, response);
    copy.headers.set("Connection", "close");
    return copy;
  }
}

/** Graceful first; connections still open after the grace period are closed. */
async function stopServer(server: Server<unknown>, drainTimeoutMs: number): Promise<void> {
  const graceful = server.stop(false).then(() => "drained" as const);
  const outcome = await withDeadline(graceful, drainTimeoutMs, () => "expired" as const);
  if (outcome === "expired") await server.stop(true);
}
