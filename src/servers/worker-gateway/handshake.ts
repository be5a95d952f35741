/**
 * The handshake: from a socket's open to its verdict. A peer has `handshakeTimeoutMs` to send
 * one credential frame and nothing else; the verdict is an accepted, registered rank with its
 * `welcome`, or the 7 bytes `refused` held back to the common floor. Nothing else is ever
 * sent before the credential is judged (see gateway.ts for why).
 */
import type { Socket } from "bun";
import type { Credential } from "../../wire/credential.ts";
import { createSocketWriter } from "../../wire/socket-writer.ts";
import {
  createFrameDecoder,
  type FrameDecoder,
  MAX_CREDENTIAL_FRAME_BYTES,
  REFUSED_BYTES,
} from "../../wire/worker-protocol.ts";
import {
  type Conn,
  type Connections,
  LINGER_MS,
  type LiveState,
  MAX_PENDING_WRITE_BYTES,
} from "./connections.ts";
import {
  type CredentialVerdict,
  judgeCredential,
  NOT_A_FRAME,
  type RefusalReason,
  type Unparsable,
} from "./credential.ts";
import { slotKey } from "./rendezvous.ts";

/** A new socket: a connection in the handshake, or closed at once when there is no room. */
export function openConnection(room: Connections, socket: Socket<Conn>): void {
  const { settings } = room;
  socket.setNoDelay(true);
  const conn: Conn = {
    socket,
    // A unix socket peer has no address; said, rather than an empty string in every event.
    remoteAddress: socket.remoteAddress || "unix socket",
    writer: createSocketWriter(socket, { maxPendingBytes: MAX_PENDING_WRITE_BYTES }),
    timer: null,
    state: {
      phase: "handshake",
      decoder: createFrameDecoder({ maxFrameBytes: MAX_CREDENTIAL_FRAME_BYTES }),
    },
  };
  socket.data = conn;
  if (!room.closed && room.handshaking >= settings.maxPendingHandshakes) evictOldest(room);
  if (room.closed || room.handshaking >= settings.maxPendingHandshakes) {
    // Not a judgement on a credential (none was read): just no capacity. No byte is sent.
    conn.state = { phase: "closed" };
    socket.terminate();
    return;
  }
  room.all.add(conn);
  room.handshaking++;
  room.setTimer(conn, settings.handshakeTimeoutMs, () =>
    refuse(room, conn, "handshake timeout", performance.now()),
  );
}

/**
 * At capacity the OLDEST connection still waiting for its credential makes room, not the
 * newcomer: a real worker sends its credential within milliseconds of connecting, so the
 * oldest silent peer is the one least likely to be a worker. Refusing the newest instead let
 * code in one session hold the gateway shut for every other session's workers by opening a
 * few hundred idle connections. Closed without a byte, like any capacity refusal.
 */
function evictOldest(room: Connections): void {
  const { log } = room.settings;
  for (const candidate of room.all) {
    if (candidate.state.phase !== "handshake") continue;
    log.info("worker gateway: handshake capacity reached; closing the oldest waiting peer", {
      remoteAddress: candidate.remoteAddress,
    });
    room.retire(candidate, "evicted: handshake capacity", true);
    return;
  }
}

export function onHandshakeData(
  room: Connections,
  conn: Conn,
  decoder: FrameDecoder,
  chunk: Uint8Array,
): void {
  const decidedAt = performance.now();
  const result = decoder.push(chunk);
  switch (result.kind) {
    case "Oversized":
      judge(room, conn, NOT_A_FRAME, decidedAt, "oversized");
      return;
    case "Malformed":
      judge(room, conn, NOT_A_FRAME, decidedAt, "malformed");
      return;
    case "Frames": {
      const [first] = result.frames;
      if (first === undefined) return; // not complete yet: wait (the deadline runs)
      // The worker sends exactly one frame and waits for the verdict; anything more is not
      // a worker. It is judged like garbage, through the same path.
      const alone = result.frames.length === 1 && decoder.buffered() === 0;
      judge(room, conn, alone ? first : NOT_A_FRAME, decidedAt, "malformed");
      return;
    }
    default: {
      const never: never = result;
      throw new Error(`unhandled decode result ${JSON.stringify(never)}`);
    }
  }
}

/**
 * Verifies, burns, registers: all synchronous, so two connections for one rank cannot both
 * pass before either is recorded.
 */
export function judge(
  room: Connections,
  conn: Conn,
  frame: unknown,
  decidedAt: number,
  unparsable: Unparsable,
): void {
  const { settings } = room;
  const { log } = settings;
  let verdict: CredentialVerdict;
  try {
    verdict = judgeCredential(frame, unparsable, {
      key: settings.key,
      now: settings.clock.now(),
      expectations: settings.expectations,
      stopped: (allocationId, epoch) => room.stopped.has(slotKey(allocationId, epoch)),
      burn: (c) =>
        settings.store.burn({
          nonce: c.nonce,
          allocationId: c.allocationId,
          expiresAt: c.expiresAt,
        }),
    });
  } catch (error) {
    log.error("worker gateway: credential check failed", { error: String(error) });
    verdict = { kind: "Refused", reason: "internal error", authentic: null };
  }
  switch (verdict.kind) {
    case "Accepted":
      accept(room, conn, verdict.credential);
      return;
    case "Refused":
      refuse(room, conn, verdict.reason, decidedAt, verdict.authentic);
      return;
    default: {
      const never: never = verdict;
      throw new Error(`unhandled verdict ${JSON.stringify(never)}`);
    }
  }
}

/** Refuses after the common floor; the peer hears `refused` and nothing of the reason. */
export function refuse(
  room: Connections,
  conn: Conn,
  reason: RefusalReason,
  decidedAt: number,
  authenticClaims: Credential | null = null,
): void {
  const { settings } = room;
  const { log } = settings;
  if (conn.state.phase !== "handshake") return;
  conn.state = { phase: "refusing" };
  // The peer learns nothing of `reason`; the operator does. Claims are logged only when
  // the signature held (never the signature itself); otherwise they are a stranger's words.
  log.info("worker gateway: credential refused", {
    remoteAddress: conn.remoteAddress,
    reason,
    ...(authenticClaims && {
      allocationId: authenticClaims.allocationId,
      epoch: authenticClaims.epoch,
      rank: authenticClaims.rank,
    }),
  });
  room.emit({ kind: "CredentialRefused", remoteAddress: conn.remoteAddress });
  const delay = Math.max(0, decidedAt + settings.refusalFloorMs - performance.now());
  room.setTimer(conn, delay, () => {
    // Linger first: the FIN below may close the socket (and retire `conn`) synchronously.
    room.setTimer(conn, LINGER_MS, () => conn.socket.terminate());
    conn.writer.write(REFUSED_BYTES);
    conn.writer.endWhenFlushed();
  });
}

function accept(room: Connections, conn: Conn, credential: Credential): void {
  const { settings } = room;
  room.leaveHandshake(conn);
  conn.timer?.();
  conn.timer = null;
  const { allocationId, epoch, rank } = credential;
  const now = settings.clock.now();
  const live: LiveState = {
    phase: "live",
    allocationId,
    epoch,
    rank,
    decoder: createFrameDecoder({ maxFrameBytes: settings.maxFrameBytes }),
    pending: new Map(),
    connectedAt: now,
    nextRequestId: 1,
    lastSeenAt: now,
    kernel: null,
  };
  conn.state = live;
  const previous = room.rendezvous.at(allocationId, epoch, rank);
  // A fresh credential for a rank that is still connected comes from that rank's worker
  // resuming over a new connection; the old one is presumed half-open. Retired BEFORE the
  // rank table is looked up: retiring the last rank drops the table, and the new
  // connection went into the dropped one (connected, yet never found).
  if (previous) room.retire(previous, "replaced", true);
  // Waiters are told by a promise, so after the welcome and the event below.
  room.rendezvous.seat(allocationId, epoch, rank, conn);
  room.send(conn, {
    kind: "welcome",
    allocationId,
    epoch,
    rank,
    heartbeatIntervalMs: settings.heartbeatIntervalMs,
    resume: room.mintResume(live),
  });
  settings.log.info("worker gateway: worker connected", {
    allocationId,
    epoch,
    rank,
    remoteAddress: conn.remoteAddress,
  });
  room.emit({ kind: "WorkerConnected", allocationId, epoch, rank });
}
