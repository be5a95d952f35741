/**
 * The gateway's table of connections and the few primitives every phase of a connection uses
 * (send a frame, time one wait, retire): the handshake, the live relay and the listener all
 * act on a connection through this one room, so "who holds a rank" and "what is pending"
 * change in exactly one place.
 */
import type { NonceBurner } from "../../core/ports/nonce-burner.ts";
import type {
  GatewayEvent,
  GatewayExpectations,
  RequestOutcome,
} from "../../core/ports/worker-gateway.ts";
import type { Clock, Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import {
  type Credential,
  mintNonce,
  type RandomBytes,
  type SigningKey,
  signCredential,
} from "../../wire/credential.ts";
import type { SocketWriter } from "../../wire/socket-writer.ts";
import {
  type CellEvent,
  encodeFrame,
  type FrameDecoder,
  type GatewayMessage,
  type KernelStatus,
  type WorkerRequest,
  type WorkerResponse,
} from "../../wire/worker-protocol.ts";
import { createRendezvous, type Rendezvous } from "./rendezvous.ts";

/** A request sent on a live connection, waiting for its answer. */
export interface Pending {
  readonly kind: WorkerRequest["kind"];
  readonly onEvent: ((event: CellEvent) => void) | undefined;
  readonly cancelTimeout: () => void;
  readonly resolve: (outcome: RequestOutcome<WorkerResponse>) => void;
}

export interface LiveState {
  readonly phase: "live";
  readonly allocationId: string;
  readonly epoch: number;
  readonly rank: number;
  readonly decoder: FrameDecoder;
  readonly pending: Map<number, Pending>;
  readonly connectedAt: number;
  nextRequestId: number;
  lastSeenAt: number;
  kernel: KernelStatus | null;
}

export type ConnState =
  | { readonly phase: "handshake"; readonly decoder: FrameDecoder }
  | { readonly phase: "refusing" }
  | LiveState
  | { readonly phase: "closed" };

/** The minimum of a socket a connection uses (Bun's `Socket<Conn>` satisfies it). */
export interface ConnSocket {
  readonly remoteAddress: string;
  setNoDelay(noDelay: boolean): void;
  terminate(): void;
}

export interface Conn {
  readonly socket: ConnSocket;
  readonly remoteAddress: string;
  readonly writer: SocketWriter;
  /** Handshake deadline, refusal delay, or post-stop linger: at most one at a time. */
  timer: (() => void) | null;
  state: ConnState;
}

/** How long a refused or stopped peer may linger before we cut it off. */
export const LINGER_MS = 5000;
/** Bytes a peer may leave unread before we give up on it. */
export const MAX_PENDING_WRITE_BYTES = 8 * 1024 * 1024;

/** The gateway's settings with every default applied. */
export interface GatewaySettings {
  readonly store: NonceBurner;
  readonly expectations: GatewayExpectations;
  readonly key: SigningKey;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Log;
  readonly maxFrameBytes: number;
  readonly heartbeatIntervalMs: number;
  readonly handshakeTimeoutMs: number;
  readonly refusalFloorMs: number;
  readonly resumeTtlMs: number;
  readonly maxPendingHandshakes: number;
  readonly random: RandomBytes;
  readonly onEvent: ((event: GatewayEvent) => void) | undefined;
}

/** Every connection the gateway holds, and the primitives that change them. */
export interface Connections {
  readonly settings: GatewaySettings;
  readonly rendezvous: Rendezvous<Conn>;
  /** Pairs told to stop: refused from now on even before the store says fenced. */
  readonly stopped: Set<string>;
  /** Every connection not yet retired, oldest first. */
  readonly all: Set<Conn>;
  /** Connections still in the handshake or refusing (the capacity `maxPendingHandshakes` caps). */
  handshaking: number;
  /** The gateway was closed: no new connection is taken. */
  closed: boolean;
  emit(event: GatewayEvent): void;
  send(conn: Conn, message: GatewayMessage): boolean;
  /** Replaces the connection's one timer (none once it is closed). */
  setTimer(conn: Conn, ms: number, action: () => void): void;
  /** Leaves the handshake count, if it was in it. */
  leaveHandshake(conn: Conn): void;
  /**
   * Takes a connection out of every table (idempotent): its rank is no longer connected, its
   * pending requests resolve Disconnected. With `terminate` the socket is cut too.
   */
  retire(conn: Conn, reason: string, terminate: boolean): void;
  /** A fresh single-use resume credential for the live connection's rank. */
  mintResume(live: LiveState): Credential;
}

export function createConnections(settings: GatewaySettings): Connections {
  const { timers, log } = settings;
  const room: Connections = {
    settings,
    rendezvous: createRendezvous<Conn>(),
    stopped: new Set<string>(),
    all: new Set<Conn>(),
    handshaking: 0,
    closed: false,

    emit(event) {
      if (!settings.onEvent) return;
      try {
        settings.onEvent(event);
      } catch (error) {
        log.error("worker gateway: event subscriber threw", {
          event: event.kind,
          error: String(error),
        });
      }
    },

    send(conn, message) {
      const frame = encodeFrame(message, settings.maxFrameBytes);
      if (!frame) return false;
      return conn.writer.write(frame);
    },

    setTimer(conn, ms, action) {
      conn.timer?.();
      conn.timer = null;
      if (conn.state.phase === "closed") return; // retired meanwhile: nothing left to time
      conn.timer = timers.after(ms, () => {
        conn.timer = null;
        action();
      });
    },

    leaveHandshake(conn) {
      if (conn.state.phase === "handshake" || conn.state.phase === "refusing") room.handshaking--;
    },

    retire(conn, reason, terminate) {
      const state = conn.state;
      if (state.phase === "closed") return;
      room.leaveHandshake(conn);
      conn.state = { phase: "closed" };
      room.all.delete(conn);
      conn.timer?.();
      conn.timer = null;
      if (state.phase === "live") retireLive(room, conn, state, reason);
      if (terminate) conn.socket.terminate();
    },

    mintResume(live) {
      return signCredential(settings.key, {
        allocationId: live.allocationId,
        epoch: live.epoch,
        rank: live.rank,
        expiresAt: settings.clock.now() + settings.resumeTtlMs,
        nonce: mintNonce(settings.random),
      });
    },
  };
  return room;
}

/** The rank is free again and every request still waiting on it is told Disconnected. */
function retireLive(room: Connections, conn: Conn, state: LiveState, reason: string): void {
  room.rendezvous.unseat(state.allocationId, state.epoch, state.rank, conn);
  for (const pending of state.pending.values()) {
    pending.cancelTimeout();
    pending.resolve({ kind: "Disconnected" });
  }
  state.pending.clear();
  const { allocationId, epoch, rank } = state;
  room.settings.log.info("worker gateway: worker disconnected", {
    allocationId,
    epoch,
    rank,
    reason,
  });
  room.emit({ kind: "WorkerDisconnected", allocationId, epoch, rank, reason });
}
