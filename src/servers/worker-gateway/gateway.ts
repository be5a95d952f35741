/**
 * Where backend-placed workers dial back. Not opened unless `OPENAI4S_WORKER_LISTEN` says so
 * (the daemon decides, with `workerGatewayListenFromEnv`): a listener on by default is attack
 * surface on every laptop that will never run a cluster job. The worker is the client because
 * compute nodes usually can reach nobody while the daemon usually can be reached.
 *
 * The credential is verified and its nonce burned before a single byte goes back: this socket
 * carries code execution, and a listener that serves first and checks later is a
 * remote-execution surface for the duration of "later". A refusal is the 7 ASCII bytes
 * `refused` and a close, whatever the cause (expired, replayed, forged, wrong epoch, unknown
 * allocation, malformed, oversized, too slow): the difference is itself an oracle. For the
 * same reason every judged credential takes the same path (the HMAC is always computed, the
 * expectation always looked up, even for garbage) and every refusal is held back to a common
 * floor (`refusalFloorMs`, counted from the moment the deciding bytes arrived), so timing does
 * not tell which check failed. Which check it was goes to the daemon's log only.
 *
 * Rendezvous is keyed by (allocationId, epoch): a latecomer from a previous epoch cannot
 * satisfy a wait on the current one (and is refused anyway, its epoch not being current).
 *
 * Reconnection. A credential connects once: its nonce is burned durably. So that a network
 * blip or a daemon restart does not kill a session's kernel, the gateway hands every
 * connected worker a fresh single-use *resume* credential (same allocation, epoch and rank,
 * new nonce, `resumeTtlMs` validity) in `welcome` and again in every `heartbeat_ack`. A worker
 * that loses its connection dials again with the newest one until its grace period ends. It
 * passes exactly the same verification (the key and the burn table are durable, the
 * expectations come from the store), so a restarted daemon takes its workers back and a
 * stopped or superseded allocation refuses them. A resumed connection for a rank replaces
 * the rank's previous one, which is presumed half-open.
 *
 * Transport: TLS (see gateway-tls.ts), the worker pinning the daemon's certificate by its
 * fingerprint, so code and output cross the network encrypted and a worker talks to no
 * impostor. The worker authenticates with the credential, inside the encrypted channel, first
 * thing, exactly as over plain TCP (the admin's explicit opt-out, for a network they trust).
 */
import { hostname as osHostname } from "node:os";
import type { Socket, SocketHandler, TCPSocketListener, UnixSocketListener } from "bun";
import type { NonceBurner } from "../../core/ports/nonce-burner.ts";
import type {
  GatewayEvent,
  GatewayExpectations,
  RequestOptions,
  RequestOutcome,
  WorkerGateway,
} from "../../core/ports/worker-gateway.ts";
import { type Clock, systemTimers, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import {
  type Credential,
  mintNonce,
  type RandomBytes,
  type SigningKey,
  signCredential,
} from "../../wire/credential.ts";
import {
  type CellEvent,
  createFrameDecoder,
  createSocketWriter,
  DEFAULT_MAX_FRAME_BYTES,
  encodeFrame,
  type FrameDecoder,
  formatHostPort,
  type GatewayMessage,
  type KernelStatus,
  LIVENESS_INTERVALS,
  MAX_CREDENTIAL_FRAME_BYTES,
  parseHostPort,
  parseWorkerMessage,
  REFUSED_BYTES,
  type ResponseFor,
  type SocketWriter,
  type WorkerRequest,
  type WorkerResponse,
} from "../../wire/worker-protocol.ts";
import {
  type CredentialVerdict,
  judgeCredential,
  NOT_A_FRAME,
  type RefusalReason,
  type Unparsable,
} from "./credential.ts";
import { createRendezvous, slotKey } from "./rendezvous.ts";

export interface WorkerGatewayOptions {
  /** HOST:PORT to listen on (port 0: any free port; see `address` for the result). */
  readonly listen: string;
  /**
   * TLS on the listener (PEM). Workers pin the certificate's fingerprint; null is plain TCP,
   * which the daemon only does when the admin opted out explicitly.
   */
  readonly tls: { readonly keyPem: string; readonly certPem: string } | null;
  /**
   * The host written into credentials. Default: the listen host, or this machine's hostname
   * when listening on a wildcard address (0.0.0.0, ::).
   */
  readonly advertiseHost?: string;
  /**
   * Also listen on this unix socket (same TLS, same protocol): how workers of a job without
   * network (its own network namespace) reach the gateway, the socket bound into their
   * sandbox. The caller owns the file (stale removal, mode).
   */
  readonly unixSocket?: string;
  readonly store: NonceBurner;
  readonly key: SigningKey;
  /** For credential expiry and last-seen times. */
  readonly clock: Clock;
  /**
   * Every wait: handshake deadline, refusal floor, request timeouts, the liveness sweep, the
   * linger after a stop (tests: a manual timeline). Default: real timers.
   */
  readonly timers?: Timers;
  readonly log: Log;
  readonly expectations: GatewayExpectations;
  /** Cap on frames after the handshake (default 1 MiB). */
  readonly maxFrameBytes?: number;
  /** How often workers heartbeat (default 5000). 3 missed intervals drop the connection. */
  readonly heartbeatIntervalMs?: number;
  /** A peer that has not sent a complete credential frame by then is refused (default 10 s). */
  readonly handshakeTimeoutMs?: number;
  /**
   * Every refusal is sent this long after the deciding bytes arrived (default 100 ms). Must
   * exceed the slowest verification (an fsynced nonce burn), or timing leaks again.
   */
  readonly refusalFloorMs?: number;
  /** Validity of the resume credentials handed to connected workers (default 10 min). */
  readonly resumeTtlMs?: number;
  /** Connections still in the handshake beyond this are closed at once (default 256). */
  readonly maxPendingHandshakes?: number;
  readonly random?: RandomBytes;
  readonly onEvent?: (event: GatewayEvent) => void;
}

// ---------------------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------------------

interface Pending {
  readonly kind: WorkerRequest["kind"];
  readonly onEvent: ((event: CellEvent) => void) | undefined;
  readonly cancelTimeout: () => void;
  readonly resolve: (outcome: RequestOutcome<WorkerResponse>) => void;
}

interface LiveState {
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

type ConnState =
  | { readonly phase: "handshake"; readonly decoder: FrameDecoder }
  | { readonly phase: "refusing" }
  | LiveState
  | { readonly phase: "closed" };

interface Conn {
  readonly socket: Socket<Conn>;
  readonly remoteAddress: string;
  readonly writer: SocketWriter;
  /** Handshake deadline, refusal delay, or post-stop linger: at most one at a time. */
  timer: (() => void) | null;
  state: ConnState;
}

/** How long a refused or stopped peer may linger before we cut it off. */
const LINGER_MS = 5000;
/** Bytes a peer may leave unread before we give up on it. */
const MAX_PENDING_WRITE_BYTES = 8 * 1024 * 1024;
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;
const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "[::]"]);

export function createWorkerGateway(options: WorkerGatewayOptions): WorkerGateway {
  const listen = parseHostPort(options.listen);
  if (!listen) throw new Error(`worker gateway: cannot listen on ${options.listen}`);
  const { store, key, clock, log, expectations } = options;
  const timers = options.timers ?? systemTimers;
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 5000;
  const handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
  const refusalFloorMs = options.refusalFloorMs ?? 100;
  const resumeTtlMs = options.resumeTtlMs ?? 10 * 60 * 1000;
  const maxPendingHandshakes = options.maxPendingHandshakes ?? 256;
  const random = options.random ?? ((n: number) => crypto.getRandomValues(new Uint8Array(n)));

  const rendezvous = createRendezvous<Conn>();
  /** Stopped peers given LINGER_MS to close: cut → cancel of its timer. */
  const lingering = new Map<() => void, () => void>();
  /** Pairs told to stop: refused from now on even before the store says fenced. */
  const stopped = new Set<string>();
  const conns = new Set<Conn>();
  let handshaking = 0;
  let closed = false;
  let lastPruneAt = Number.NEGATIVE_INFINITY;

  function emit(event: GatewayEvent): void {
    if (!options.onEvent) return;
    try {
      options.onEvent(event);
    } catch (error) {
      log.error("worker gateway: event subscriber threw", {
        event: event.kind,
        error: String(error),
      });
    }
  }

  function send(conn: Conn, message: GatewayMessage): boolean {
    const frame = encodeFrame(message, maxFrameBytes);
    if (!frame) return false;
    return conn.writer.write(frame);
  }

  function setTimer(conn: Conn, ms: number, action: () => void): void {
    conn.timer?.();
    conn.timer = null;
    if (conn.state.phase === "closed") return; // retired meanwhile: nothing left to time
    conn.timer = timers.after(ms, () => {
      conn.timer = null;
      action();
    });
  }

  function leaveHandshake(conn: Conn): void {
    if (conn.state.phase === "handshake" || conn.state.phase === "refusing") handshaking--;
  }

  // --- handshake ------------------------------------------------------------------------

  function onOpen(socket: Socket<Conn>): void {
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
    if (!closed && handshaking >= maxPendingHandshakes) evictOldestHandshake();
    if (closed || handshaking >= maxPendingHandshakes) {
      // Not a judgement on a credential (none was read): just no capacity. No byte is sent.
      conn.state = { phase: "closed" };
      socket.terminate();
      return;
    }
    conns.add(conn);
    handshaking++;
    setTimer(conn, handshakeTimeoutMs, () => refuse(conn, "handshake timeout", performance.now()));
  }

  /**
   * At capacity the OLDEST connection still waiting for its credential makes room, not the
   * newcomer: a real worker sends its credential within milliseconds of connecting, so the
   * oldest silent peer is the one least likely to be a worker. Refusing the newest instead let
   * code in one session hold the gateway shut for every other session's workers by opening a
   * few hundred idle connections. Closed without a byte, like any capacity refusal.
   */
  function evictOldestHandshake(): void {
    for (const candidate of conns) {
      if (candidate.state.phase !== "handshake") continue;
      log.info("worker gateway: handshake capacity reached; closing the oldest waiting peer", {
        remoteAddress: candidate.remoteAddress,
      });
      retire(candidate, "evicted: handshake capacity", true);
      return;
    }
  }

  function onHandshakeData(conn: Conn, decoder: FrameDecoder, chunk: Uint8Array): void {
    const decidedAt = performance.now();
    const result = decoder.push(chunk);
    switch (result.kind) {
      case "Oversized":
        judge(conn, NOT_A_FRAME, decidedAt, "oversized");
        return;
      case "Malformed":
        judge(conn, NOT_A_FRAME, decidedAt, "malformed");
        return;
      case "Frames": {
        const [first] = result.frames;
        if (first === undefined) return; // not complete yet: wait (the deadline runs)
        // The worker sends exactly one frame and waits for the verdict; anything more is not
        // a worker. It is judged like garbage, through the same path.
        const alone = result.frames.length === 1 && decoder.buffered() === 0;
        judge(conn, alone ? first : NOT_A_FRAME, decidedAt, "malformed");
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
  function judge(conn: Conn, frame: unknown, decidedAt: number, unparsable: Unparsable): void {
    let verdict: CredentialVerdict;
    try {
      verdict = judgeCredential(frame, unparsable, {
        key,
        now: clock.now(),
        expectations,
        stopped: (allocationId, epoch) => stopped.has(slotKey(allocationId, epoch)),
        burn: (c) =>
          store.burn({
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
        accept(conn, verdict.credential);
        return;
      case "Refused":
        refuse(conn, verdict.reason, decidedAt, verdict.authentic);
        return;
      default: {
        const never: never = verdict;
        throw new Error(`unhandled verdict ${JSON.stringify(never)}`);
      }
    }
  }

  function refuse(
    conn: Conn,
    reason: RefusalReason,
    decidedAt: number,
    authenticClaims: Credential | null = null,
  ): void {
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
    emit({ kind: "CredentialRefused", remoteAddress: conn.remoteAddress });
    const delay = Math.max(0, decidedAt + refusalFloorMs - performance.now());
    setTimer(conn, delay, () => {
      // Linger first: the FIN below may close the socket (and retire `conn`) synchronously.
      setTimer(conn, LINGER_MS, () => conn.socket.terminate());
      conn.writer.write(REFUSED_BYTES);
      conn.writer.endWhenFlushed();
    });
  }

  function accept(conn: Conn, credential: Credential): void {
    leaveHandshake(conn);
    conn.timer?.();
    conn.timer = null;
    const { allocationId, epoch, rank } = credential;
    const now = clock.now();
    const live: LiveState = {
      phase: "live",
      allocationId,
      epoch,
      rank,
      decoder: createFrameDecoder({ maxFrameBytes }),
      pending: new Map(),
      connectedAt: now,
      nextRequestId: 1,
      lastSeenAt: now,
      kernel: null,
    };
    conn.state = live;
    const previous = rendezvous.at(allocationId, epoch, rank);
    // A fresh credential for a rank that is still connected comes from that rank's worker
    // resuming over a new connection; the old one is presumed half-open. Retired BEFORE the
    // rank table is looked up: retiring the last rank drops the table, and the new
    // connection went into the dropped one (connected, yet never found).
    if (previous) retire(previous, "replaced", true);
    // Waiters are told by a promise, so after the welcome and the event below.
    rendezvous.seat(allocationId, epoch, rank, conn);
    send(conn, {
      kind: "welcome",
      allocationId,
      epoch,
      rank,
      heartbeatIntervalMs,
      resume: mintResume(live),
    });
    log.info("worker gateway: worker connected", {
      allocationId,
      epoch,
      rank,
      remoteAddress: conn.remoteAddress,
    });
    emit({ kind: "WorkerConnected", allocationId, epoch, rank });
  }

  function mintResume(live: LiveState): Credential {
    return signCredential(key, {
      allocationId: live.allocationId,
      epoch: live.epoch,
      rank: live.rank,
      expiresAt: clock.now() + resumeTtlMs,
      nonce: mintNonce(random),
    });
  }

  // --- live connections ----------------------------------------------------------------

  function onLiveData(conn: Conn, live: LiveState, chunk: Uint8Array): void {
    const result = live.decoder.push(chunk);
    switch (result.kind) {
      case "Oversized":
        drop(conn, `protocol violation: frame of ${result.length} bytes`);
        return;
      case "Malformed":
        drop(conn, `protocol violation: ${result.message}`);
        return;
      case "Frames":
        break;
      default: {
        const never: never = result;
        throw new Error(`unhandled decode result ${JSON.stringify(never)}`);
      }
    }
    for (const frame of result.frames) {
      if (conn.state !== live) return; // dropped by an earlier frame of this chunk
      const message = parseWorkerMessage(frame);
      if (!message) {
        drop(conn, "protocol violation: unknown message");
        return;
      }
      live.lastSeenAt = clock.now();
      switch (message.kind) {
        case "heartbeat":
          send(conn, { kind: "heartbeat_ack", resume: mintResume(live) });
          break;
        case "event": {
          const pending = live.pending.get(message.id);
          // Output of a request that timed out, or of one without output: nobody to give it to.
          if (pending?.kind !== "exec" && pending?.kind !== "jupyter") break;
          try {
            pending.onEvent?.(message.event);
          } catch (error) {
            log.error("worker gateway: event listener threw", { error: String(error) });
          }
          break;
        }
        case "kernel_status":
          // Only a change is news: a worker repeating itself must not drive readiness passes.
          if (
            live.kernel?.state === message.status.state &&
            live.kernel.message === message.status.message
          ) {
            break;
          }
          live.kernel = message.status;
          emit({
            kind: "KernelStatus",
            allocationId: live.allocationId,
            epoch: live.epoch,
            rank: live.rank,
            status: message.status,
          });
          break;
        case "response": {
          const pending = live.pending.get(message.id);
          // Unknown ids are answers that came after their request timed out: harmless.
          if (!pending) break;
          const { response } = message;
          if (response.kind !== pending.kind && response.kind !== "error") {
            drop(conn, `protocol violation: ${response.kind} answers ${pending.kind}`);
            return;
          }
          live.pending.delete(message.id);
          pending.cancelTimeout();
          pending.resolve(
            response.kind === "error"
              ? { kind: "WorkerError", message: response.message }
              : { kind: "Answered", response },
          );
          break;
        }
        default: {
          const never: never = message;
          throw new Error(`unhandled worker message ${JSON.stringify(never)}`);
        }
      }
    }
  }

  /** Cuts a connection off now. */
  function drop(conn: Conn, reason: string): void {
    retire(conn, reason, true);
  }

  /**
   * Takes a connection out of every table (idempotent): its rank is no longer connected, its
   * pending requests resolve Disconnected. With `terminate` the socket is cut too.
   */
  function retire(conn: Conn, reason: string, terminate: boolean): void {
    const state = conn.state;
    if (state.phase === "closed") return;
    leaveHandshake(conn);
    conn.state = { phase: "closed" };
    conns.delete(conn);
    conn.timer?.();
    conn.timer = null;
    if (state.phase === "live") {
      rendezvous.unseat(state.allocationId, state.epoch, state.rank, conn);
      for (const pending of state.pending.values()) {
        pending.cancelTimeout();
        pending.resolve({ kind: "Disconnected" });
      }
      state.pending.clear();
      log.info("worker gateway: worker disconnected", {
        allocationId: state.allocationId,
        epoch: state.epoch,
        rank: state.rank,
        reason,
      });
      emit({
        kind: "WorkerDisconnected",
        allocationId: state.allocationId,
        epoch: state.epoch,
        rank: state.rank,
        reason,
      });
    }
    if (terminate) conn.socket.terminate();
  }

  function sweep(): void {
    const now = clock.now();
    const deadAfterMs = LIVENESS_INTERVALS * heartbeatIntervalMs;
    for (const conn of conns) {
      const state = conn.state;
      if (state.phase === "live" && now - state.lastSeenAt > deadAfterMs) {
        drop(conn, "heartbeat timeout");
      }
    }
    if (now - lastPruneAt >= PRUNE_INTERVAL_MS) {
      lastPruneAt = now;
      try {
        store.prune();
      } catch (error) {
        log.warn("worker gateway: pruning burned nonces failed", { error: String(error) });
      }
    }
  }

  // --- the listener --------------------------------------------------------------------

  /** A bug in one connection's handling must cost that connection, not the gateway. */
  function guarded(conn: Conn, action: () => void): void {
    try {
      action();
    } catch (error) {
      log.error("worker gateway: connection handler failed", { error: String(error) });
      if (conn.state.phase === "handshake") {
        refuse(conn, "internal error", performance.now());
      } else {
        drop(conn, "internal error");
      }
    }
  }

  const handlers = socketHandlers({
    open: onOpen,
    onHandshakeData,
    onLiveData,
    judge,
    retire,
    guarded,
    log,
  });
  const listener = listenFor(listen, options.tls, handlers);
  const unixListener =
    options.unixSocket === undefined
      ? null
      : listenOnUnix(options.unixSocket, options.tls, handlers);

  let cancelSweep = timers.after(heartbeatIntervalMs, function sweepAndAgain() {
    sweep();
    cancelSweep = timers.after(heartbeatIntervalMs, sweepAndAgain);
  });
  const advertised =
    options.advertiseHost ??
    (WILDCARD_HOSTS.has(listener.hostname) ? osHostname() : listener.hostname);
  const address = formatHostPort({ hostname: advertised, port: listener.port });
  log.info("worker gateway: listening", { address });

  return {
    address,

    connected(allocationId, epoch) {
      return rendezvous.ranks(allocationId, epoch);
    },

    connection(allocationId, epoch, rank) {
      const conn = rendezvous.at(allocationId, epoch, rank);
      if (conn?.state.phase !== "live") return null;
      return {
        remoteAddress: conn.remoteAddress,
        connectedAt: conn.state.connectedAt,
        lastSeenAt: conn.state.lastSeenAt,
        kernel: conn.state.kernel,
      };
    },

    waitForRanks(allocationId, epoch, ranks, signal) {
      if (closed) return Promise.resolve({ kind: "Closed" });
      return rendezvous.waitFor(allocationId, epoch, ranks, signal);
    },

    request<R extends WorkerRequest>(
      allocationId: string,
      epoch: number,
      rank: number,
      request: R,
      timeoutMs: number,
      requestOptions: RequestOptions = {},
    ): Promise<RequestOutcome<ResponseFor<R>>> {
      const conn = rendezvous.at(allocationId, epoch, rank);
      if (conn?.state.phase !== "live") return Promise.resolve({ kind: "NotConnected" });
      return sendRequest(conn, conn.state, request, {
        timeoutMs,
        onEvent: requestOptions.onEvent,
        maxFrameBytes,
        timers,
        onStalled: () => retire(conn, "peer stopped reading", true),
      });
    },

    stop(allocationId, epoch, reason) {
      stopped.add(slotKey(allocationId, epoch));
      const ranks = rendezvous.seated(allocationId, epoch);
      for (const conn of ranks) {
        // Retired first: from this moment the rank is not connected, whatever the socket does.
        retire(conn, "stopped", false);
        send(conn, { kind: "stop", reason });
        conn.writer.endWhenFlushed();
        // The worker closes on `stop`; one that does not is cut off after the linger.
        const socket = conn.socket;
        const cut = () => {
          lingering.delete(cut);
          socket.terminate();
        };
        const cancel = timers.after(LINGER_MS, cut);
        lingering.set(cut, cancel);
      }
      return ranks.length;
    },

    async close() {
      if (closed) return;
      closed = true;
      cancelSweep();
      // A stopped peer still lingering is cut now: nothing would be left to time it.
      for (const [cut, cancel] of [...lingering]) {
        cancel();
        cut();
      }
      for (const conn of [...conns]) retire(conn, "gateway closed", true);
      rendezvous.close();
      listener.stop(true);
      unixListener?.stop(true);
    },
  };
}

/** What the listener's socket events need from the gateway. */
interface ConnectionEvents {
  open(socket: Socket<Conn>): void;
  onHandshakeData(conn: Conn, decoder: FrameDecoder, chunk: Uint8Array): void;
  onLiveData(conn: Conn, live: LiveState, chunk: Uint8Array): void;
  judge(conn: Conn, frame: unknown, decidedAt: number, unparsable: Unparsable): void;
  retire(conn: Conn, reason: string, terminate: boolean): void;
  guarded(conn: Conn, action: () => void): void;
  readonly log: Log;
}

/**
 * The connection state machine's transitions on socket events: each event is dispatched on
 * the connection's phase (handshake, live, refusing, closed), exhaustively.
 */
function socketHandlers(h: ConnectionEvents): SocketHandler<Conn> {
  return {
    binaryType: "uint8array",
    open: (socket) => h.open(socket),
    data(socket, chunk) {
      const conn = socket.data;
      h.guarded(conn, () => {
        const state = conn.state;
        switch (state.phase) {
          case "handshake":
            return h.onHandshakeData(conn, state.decoder, chunk);
          case "live":
            return h.onLiveData(conn, state, chunk);
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
      h.guarded(conn, () => {
        const state = conn.state;
        switch (state.phase) {
          case "handshake":
            // Whatever it sent is all it will send: judge it now, however incomplete.
            h.judge(conn, NOT_A_FRAME, performance.now(), "malformed");
            return;
          case "live":
            h.retire(conn, "closed by peer", true);
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
      if (conn) h.retire(conn, "closed by peer", false);
    },
    error(socket, error) {
      const conn = socket.data as Conn | undefined;
      h.log.warn("worker gateway: socket error", { error: String(error) });
      if (conn) h.retire(conn, `socket error: ${error.message}`, true);
    },
  };
}

/** One request on a live connection: its answer, a timeout, or why it never left. */
function sendRequest<R extends WorkerRequest>(
  conn: Conn,
  live: LiveState,
  request: R,
  options: {
    readonly timeoutMs: number;
    readonly onEvent: ((event: CellEvent) => void) | undefined;
    readonly maxFrameBytes: number;
    readonly timers: Timers;
    /** The peer left too much unread: the connection is retired. */
    onStalled(): void;
  },
): Promise<RequestOutcome<ResponseFor<R>>> {
  const id = live.nextRequestId++;
  const frame = encodeFrame({ kind: "request", id, request }, options.maxFrameBytes);
  if (!frame) {
    const bytes = new TextEncoder().encode(JSON.stringify(request)).length;
    return Promise.resolve({ kind: "TooLarge", bytes });
  }
  return new Promise<RequestOutcome<ResponseFor<R>>>((resolve) => {
    const cancelTimeout = options.timers.after(options.timeoutMs, () => {
      live.pending.delete(id);
      resolve({ kind: "TimedOut" });
    });
    live.pending.set(id, {
      kind: request.kind,
      onEvent: options.onEvent,
      cancelTimeout,
      // The response kind was checked against `request.kind` on receipt.
      resolve: resolve as (outcome: RequestOutcome<WorkerResponse>) => void,
    });
    if (!conn.writer.write(frame)) options.onStalled();
  });
}

function listenOnUnix(
  path: string,
  tls: WorkerGatewayOptions["tls"],
  socket: SocketHandler<Conn>,
): UnixSocketListener<Conn> {
  return Bun.listen<Conn>({
    unix: path,
    ...(tls && { tls: { key: tls.keyPem, cert: tls.certPem } }),
    allowHalfOpen: true,
    socket,
  });
}

function listenFor(
  listen: { readonly hostname: string; readonly port: number },
  tls: WorkerGatewayOptions["tls"],
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
