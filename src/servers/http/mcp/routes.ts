/**
 * `/mcp`: the Model Context Protocol's Streamable HTTP transport (Hono's @hono/mcp carrying
 * the SDK's), on every listener, behind the API's own authentication (a principal's token as
 * a Bearer token; 401 with WWW-Authenticate without one) and the same ownership rules. POST
 * initialize opens an MCP session (Mcp-Session-Id) owned by the caller; later requests must
 * carry it, from the same caller; DELETE ends it.
 *
 * Origin: browsers send one, agents do not. The spec asks Streamable HTTP servers to check
 * it against DNS rebinding (a page on evil.example resolving its name to 127.0.0.1 and
 * posting here): a request carrying an Origin whose host is not this request's own loopback
 * name is refused, so no web page, rebound or not, drives the tools.
 */
import { randomUUID } from "node:crypto";
import { StreamableHTTPTransport } from "@hono/mcp";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { type Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { Caller } from "../../../core/principals.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { readJson } from "../validation.ts";
import { createMcpServer } from "./server.ts";
import { createSessionTable } from "./session-table.ts";

/** MCP sessions one caller may hold (each an agent connection), and the daemon in all. */
export const MCP_SESSIONS_PER_CALLER = 32;
export const MCP_SESSIONS_MAX = 1024;
/** An MCP session nobody used for this long is closed when room is needed. */
export const MCP_SESSION_IDLE_MS = 30 * 60 * 1000;

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

function ownerKey(caller: Caller): string {
  return caller.kind === "Admin" ? "admin" : `principal:${caller.name}`;
}

function rpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, { status });
}

/** Null when the request may go on; else why not (the Origin of a web page elsewhere). */
export function originRefusal(origin: string | undefined): string | null {
  if (origin === undefined) return null;
  let host: string;
  try {
    host = new URL(origin).hostname.toLowerCase();
  } catch {
    return `Origin ${JSON.stringify(origin.slice(0, 100))} is not a URL`;
  }
  return LOOPBACK.has(host)
    ? null
    : `requests from a web page at ${JSON.stringify(origin.slice(0, 100))} are refused (DNS rebinding protection)`;
}

export function createMcpRoutes(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();
  const table = createSessionTable({
    maxPerOwner: MCP_SESSIONS_PER_CALLER,
    maxTotal: MCP_SESSIONS_MAX,
    idleMs: MCP_SESSION_IDLE_MS,
    now: () => deps.clock.now(),
  });
  deps.onDaemonStop?.(() => table.closeAll());

  async function handle(
    c: Context<ApiEnv>,
    transport: StreamableHTTPTransport,
    body?: unknown,
  ): Promise<Response> {
    // Streams (a tool call's progress, the standing GET stream) are quiet for minutes while
    // a cell runs: the listener lifts its idle timeout for answers marked so.
    c.header("X-Accel-Buffering", "no");
    c.header("Cache-Control", "no-store");
    try {
      return (await transport.handleRequest(c, body)) ?? rpcError(500, -32603, "no answer");
    } catch (error) {
      if (error instanceof HTTPException) return error.getResponse();
      throw error;
    }
  }

  app.on(["GET", "POST", "DELETE"], "/mcp", async function mcp(c) {
    const refusal = originRefusal(c.req.header("origin"));
    if (refusal !== null) return rpcError(403, -32000, refusal);
    const caller = c.get("caller");
    const owner = ownerKey(caller);
    const body = c.req.method === "POST" ? await readJson(c) : undefined;
    const sessionId = c.req.header("mcp-session-id");
    if (sessionId !== undefined) {
      const entry = table.get(sessionId, owner);
      if (entry === null) return rpcError(404, -32001, "Session not found: initialize a new one");
      return handle(c, entry.transport, body);
    }
    if (c.req.method !== "POST" || !isInitializeRequest(body)) {
      return rpcError(
        400,
        -32000,
        "Bad Request: no Mcp-Session-Id; POST an initialize request first",
      );
    }
    const room = table.admit(owner);
    if (room.kind === "Full") return rpcError(429, -32000, room.message);
    const { server, busy } = createMcpServer({
      deps,
      caller,
      peer: c.env?.peerOf?.(c.req.raw) ?? "unix",
    });
    const transport = new StreamableHTTPTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        table.add({ id, owner, server, transport, busy, lastUsedMs: deps.clock.now() });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) table.remove(transport.sessionId);
    };
    await server.connect(transport);
    return handle(c, transport, body);
  });

  return app;
}
