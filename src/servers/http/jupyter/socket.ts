/**
 * Server websockets, Bun's way: `server.upgrade(request, { data })` hands the connection to
 * the listener's one `websocket` handler, which calls the handlers the route put in `data`.
 * Each listener passes `bunWebSocket` to Bun.serve and an `upgrade` in its bindings.
 */
import type { ServerWebSocket, WebSocketHandler } from "bun";

export interface SocketHandlers {
  open(ws: ServerWebSocket<SocketHandlers>): void;
  message(ws: ServerWebSocket<SocketHandlers>, message: string | Buffer): void;
  close(ws: ServerWebSocket<SocketHandlers>, code: number, reason: string): void;
}

/** A Jupyter message is at most this large (code and input included): bigger ones close. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export const bunWebSocket: WebSocketHandler<SocketHandlers> = {
  open: (ws) => ws.data.open(ws),
  message: (ws, message) => ws.data.message(ws, message),
  close: (ws, code, reason) => ws.data.close(ws, code, reason),
  maxPayloadLength: MAX_MESSAGE_BYTES,
  // A client that stops reading while a cell floods output is dropped, not buffered forever.
  backpressureLimit: 64 * 1024 * 1024,
  closeOnBackpressureLimit: true,
  // Jupyter clients ping; a quiet kernel (a long cell printing nothing) must not be cut.
  idleTimeout: 0,
  sendPings: true,
};
