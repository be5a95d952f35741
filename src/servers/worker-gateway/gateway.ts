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
import type { NonceBurner } from "../../core/ports/nonce-burner.ts";
import type {
  GatewayEvent,
  GatewayExpectations,
  RequestOptions,
  RequestOutcome,
  WorkerGateway,
} from "../../core/ports/worker-gateway.ts";
import type { Clock, Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { RandomBytes, SigningKey } from "../../wire/credential.ts";
import { formatHostPort, parseHostPort } from "../../wire/host-port.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  LIVENESS_INTERVALS,
  type ResponseFor,
  type WorkerRequest,
} from "../../wire/worker-protocol.ts";
import {
  type Connections,
  createConnections,
  type GatewaySettings,
  LINGER_MS,
} from "./connections.ts";
import { type ListenerTls, listenFor, listenOnUnix, socketHandlers } from "./listener.ts";
import { drop, sendRequest } from "./live-connection.ts";
import { slotKey } from "./rendezvous.ts";

export interface WorkerGatewayOptions {
  /** HOST:PORT to listen on (port 0: any free port; see `address` for the result). */
  readonly listen: string;
  /**
   * TLS on the listener (PEM). Workers pin the certificate's fingerprint; null is plain TCP,
   * which the daemon only does when the admin opted out explicitly.
   */
  readonly tls: ListenerTls;
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
   * linger after a stop (tests: a manual timeline), from the composition.
   */
  readonly timers: Timers;
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

const PRUNE_INTERVAL_MS = 60 * 60 * 1000;
const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "[::]"]);

function settingsFrom(options: WorkerGatewayOptions): GatewaySettings {
  return {
    store: options.store,
    expectations: options.expectations,
    key: options.key,
    clock: options.clock,
    timers: options.timers,
    log: options.log,
    maxFrameBytes: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? 5000,
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? 10_000,
    refusalFloorMs: options.refusalFloorMs ?? 100,
    resumeTtlMs: options.resumeTtlMs ?? 10 * 60 * 1000,
    maxPendingHandshakes: options.maxPendingHandshakes ?? 256,
    random: options.random ?? ((n: number) => crypto.getRandomValues(new Uint8Array(n))),
    onEvent: options.onEvent,
  };
}

export function createWorkerGateway(options: WorkerGatewayOptions): WorkerGateway {
  const listen = parseHostPort(options.listen);
  if (!listen) throw new Error(`worker gateway: cannot listen on ${options.listen}`);
  const room = createConnections(settingsFrom(options));
  const { timers, log, heartbeatIntervalMs } = room.settings;

  const handlers = socketHandlers(room);
  const listener = listenFor(listen, options.tls, handlers);
  const unixListener =
    options.unixSocket === undefined
      ? null
      : listenOnUnix(options.unixSocket, options.tls, handlers);

  const sweep = createSweep(room);
  let cancelSweep = timers.after(heartbeatIntervalMs, function sweepAndAgain() {
    sweep();
    cancelSweep = timers.after(heartbeatIntervalMs, sweepAndAgain);
  });
  const advertised =
    options.advertiseHost ??
    (WILDCARD_HOSTS.has(listener.hostname) ? osHostname() : listener.hostname);
  const address = formatHostPort({ hostname: advertised, port: listener.port });
  log.info("worker gateway: listening", { address });

  const stopper = createStopper(room);
  return {
    address,
    ...queries(room),
    stop: stopper.stop,
    async close() {
      if (room.closed) return;
      room.closed = true;
      cancelSweep();
      stopper.cutLingering();
      for (const conn of [...room.all]) room.retire(conn, "gateway closed", true);
      room.rendezvous.close();
      listener.stop(true);
      unixListener?.stop(true);
    },
  };
}

/** Drops peers whose heartbeats stopped; now and then prunes the burned nonces. */
function createSweep(room: Connections): () => void {
  let lastPruneAt = Number.NEGATIVE_INFINITY;
  const { clock, log, heartbeatIntervalMs, store } = room.settings;
  return () => {
    const now = clock.now();
    const deadAfterMs = LIVENESS_INTERVALS * heartbeatIntervalMs;
    for (const conn of room.all) {
      const state = conn.state;
      if (state.phase === "live" && now - state.lastSeenAt > deadAfterMs) {
        drop(room, conn, "heartbeat timeout");
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
  };
}

/** The port's questions about ranks, and its requests to them. */
function queries(
  room: Connections,
): Pick<WorkerGateway, "connected" | "connection" | "waitForRanks" | "request"> {
  const { rendezvous } = room;
  return {
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
      if (room.closed) return Promise.resolve({ kind: "Closed" });
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
        maxFrameBytes: room.settings.maxFrameBytes,
        timers: room.settings.timers,
        onStalled: () => room.retire(conn, "peer stopped reading", true),
      });
    },
  };
}

/** `stop`: the pair's ranks are told to stop and cut off after the linger if they do not. */
function createStopper(room: Connections): {
  readonly stop: WorkerGateway["stop"];
  /** A stopped peer still lingering is cut now: nothing would be left to time it. */
  cutLingering(): void;
} {
  /** Stopped peers given LINGER_MS to close: cut → cancel of its timer. */
  const lingering = new Map<() => void, () => void>();
  return {
    stop(allocationId, epoch, reason) {
      room.stopped.add(slotKey(allocationId, epoch));
      const ranks = room.rendezvous.seated(allocationId, epoch);
      for (const conn of ranks) {
        // Retired first: from this moment the rank is not connected, whatever the socket does.
        room.retire(conn, "stopped", false);
        room.send(conn, { kind: "stop", reason });
        conn.writer.endWhenFlushed();
        // The worker closes on `stop`; one that does not is cut off after the linger.
        const socket = conn.socket;
        const cut = () => {
          lingering.delete(cut);
          socket.terminate();
        };
        const cancel = room.settings.timers.after(LINGER_MS, cut);
        lingering.set(cut, cancel);
      }
      return ranks.length;
    },
    cutLingering() {
      for (const [cut, cancel] of [...lingering]) {
        cancel();
        cut();
      }
    },
  };
}
