/**
 * The listener: TCP and unix sockets (TLS unless the admin opted out), and the connection
 * state machine's transitions on socket events, each dispatched on the connection's phase
 * (handshake, live, refusing, closed), exhaustively.
 */
import type { SocketHandler, TCPSocketListener, UnixSocketListener } from "bun";
import type { Conn, Connections } from "./connections.ts";
import { NOT_A_FRAME } from "./credential.ts";
import { judge, onHandshakeData, openConnection, refuse } from "./handshake.ts";
import { drop, onLiveData } from "./live-connection.ts";

/** TLS material for a listener (PEM); null is plain TCP. */
export type ListenerTls = { readonly keyPem: string; readonly certPem: string } | null;

/** A bug in one connection's handling must cost that connection, not the gateway. */
function guarded(room: Connections, conn: Conn, action: () => void): void {
  try {
    action();
  } catch (error) {
    room.settings.log.error("worker gateway: connection handler failed", {
      error: String(error),
    });
    if (conn.state.phase === "handshake") {
      refuse(room, conn, "internal error", performance.now());
    } else {
      drop(room, conn, "internal error");
    }
  }
}

export function socketHandlers(room: Connections): SocketHandler<Conn> {
  return {
    binaryType: "uint8array",
    open: (socket) => openConnection(room, socket),
    data(socket, chunk) {
      const conn = socket.data;
      guarded(room, conn, () => {
        const state = conn.state;
        switch (state.phase) {
          case "handshake":
            return onHandshakeData(room, conn, state.decoder, chunk);
          case "live":
            return onLiveData(room, conn, state, chunk);
          case "refusing":
          case "closed":
            return; // read and discarded, so our close is a FIN, not a reset
          default: {
            const never: never = state;
            throw new Error(`unhandled connection state ${JSON.stringify(never)}`);
          }
        }
      });
    },
    drain(socket) {
      socket.data.writer.flush();
    },
    end(socket) {
      // The peer shut down its side (FIN).
      const conn = socket.data;
      guarded(room, conn, () => {
        const state = conn.state;
        switch (state.phase) {
          case "handshake":
            // Whatever it sent is all it will send: judge it now, however incomplete.
            judge(room, conn, NOT_A_FRAME, performance.now(), "malformed");
            return;
          case "live":
            room.retire(conn, "closed by peer", true);
            return;
          case "refusing":
          case "closed":
            return; // our answer (if any) is under way; the linger bounds the rest
          default: {
            const never: never = state;
            throw new Error(`unhandled connection state ${JSON.stringify(never)}`);
          }
        }
      });
    },
    close(socket) {
      const conn = socket.data as Conn | undefined;
      if (conn) room.retire(conn, "closed by peer", false);
    },
    error(socket, error) {
      const conn = socket.data as Conn | undefined;
      room.settings.log.warn("worker gateway: socket error", { error: String(error) });
      if (conn) room.retire(conn, `socket error: ${error.message}`, true);
    },
  };
}

export function listenOnUnix(
  path: string,
  tls: ListenerTls,
  socket: SocketHandler<Conn>,
): UnixSocketListener<Conn> {
  return Bun.listen<Conn>({
    unix: path,
    ...(tls && { tls: { key: tls.keyPem, cert: tls.certPem } }),
    allowHalfOpen: true,
    socket,
  });
}

export function listenFor(
  listen: { readonly hostname: string; readonly port: number },
  tls: ListenerTls,
  socket: SocketHandler<Conn>,
): TCPSocketListener<Conn> {
  return Bun.listen<Conn>({
    hostname: listen.hostname,
    port: listen.port,
    ...(tls && { tls: { key: tls.keyPem, cert: tls.certPem } }),
    // Half-open: after our FIN (a refusal, a stop) we keep reading, and discarding, until the
    // peer closes. Closing fully while it is still sending (an oversized frame) would answer
    // with a reset, which can destroy the unread `refused` on its side. It also lets a peer
    // that sent a truncated frame and shut down its side still hear the verdict.
    allowHalfOpen: true,
    socket,
  });
}
