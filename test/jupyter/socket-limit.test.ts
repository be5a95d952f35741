/**
 * Issue 33: the Jupyter websocket's 16 MiB message limit was untested, so it could be raised
 * or dropped unnoticed (each message is held whole in the daemon's memory). Here a real Bun
 * server with the listeners' websocket handler: a message of 16 MiB arrives, one byte more
 * closes the connection as too big (1009), and nothing of it reaches the handler.
 */
import { describe, expect, test } from "bun:test";
import { bunWebSocket, type SocketHandlers } from "../../src/servers/http/jupyter/socket.ts";
import { eventually } from "../support/eventually.ts";

const LIMIT_BYTES = 16 * 1024 * 1024;

function serve() {
  const received: number[] = [];
  const handlers: SocketHandlers = {
    open() {},
    message: (_ws, message) => void received.push(message.length),
    close() {},
  };
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (request, srv) =>
      srv.upgrade(request, { data: handlers }) ? undefined : new Response("no", { status: 400 }),
    websocket: bunWebSocket,
  });
  return { server, received };
}

/**
 * Sends `bytes`, then a small message. The server handles a connection's messages in order,
 * so the outcome is known without a timer: closed (code), or the small one handled (null).
 */
async function send(
  port: number,
  bytes: number,
  received: readonly number[],
): Promise<{ code: number | null }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let code: number | null = null;
  let closed = false;
  ws.onclose = (event) => {
    code = event.code;
    closed = true;
  };
  ws.send("x".repeat(bytes));
  ws.send("ping");
  await eventually(() => closed || received.includes(4), { what: "the server's answer" });
  ws.close();
  return { code };
}

describe("a Jupyter websocket message", () => {
  test("of 16 MiB is taken; one byte more closes the socket as too big, unread", async () => {
    const { server, received } = serve();
    try {
      expect(await send(server.port ?? 0, LIMIT_BYTES, received)).toEqual({ code: null });
      expect(received).toEqual([LIMIT_BYTES, 4]);
      received.length = 0;
      expect(await send(server.port ?? 0, LIMIT_BYTES + 1, received)).toEqual({ code: 1009 });
      expect(received).toEqual([]);
    } finally {
      server.stop(true);
    }
  });
});
