/**
 * A live connection: the frames a connected worker sends, each relayed by its kind, and the
 * requests the daemon sends it. A new kind of worker message is one more entry in `RELAY`
 * (the mapped type makes the compiler ask for it once the protocol names the kind).
 */
import type { RequestOutcome } from "../../core/ports/worker-gateway.ts";
import type { Timers } from "../../lib/clock.ts";
import {
  type CellEvent,
  encodeFrame,
  parseWorkerMessage,
  type ResponseFor,
  type WorkerMessage,
  type WorkerRequest,
  type WorkerResponse,
} from "../../wire/worker-protocol.ts";
import type { Conn, Connections, LiveState } from "./connections.ts";

/** Cuts a connection off now. */
export function drop(room: Connections, conn: Conn, reason: string): void {
  room.retire(conn, reason, true);
}

export function onLiveData(
  room: Connections,
  conn: Conn,
  live: LiveState,
  chunk: Uint8Array,
): void {
  const result = live.decoder.push(chunk);
  switch (result.kind) {
    case "Oversized":
      drop(room, conn, `protocol violation: frame of ${result.length} bytes`);
      return;
    case "Malformed":
      drop(room, conn, `protocol violation: ${result.message}`);
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
      drop(room, conn, "protocol violation: unknown message");
      return;
    }
    live.lastSeenAt = room.settings.clock.now();
    if (relay(room, conn, live, message) === "dropped") return;
  }
}

/** What became of the connection after one message: "dropped" stops the chunk's loop. */
type Relayed = "kept" | "dropped";

type Relay = {
  readonly [K in WorkerMessage["kind"]]: (
    room: Connections,
    conn: Conn,
    live: LiveState,
    message: Extract<WorkerMessage, { readonly kind: K }>,
  ) => Relayed;
};

function relay(room: Connections, conn: Conn, live: LiveState, message: WorkerMessage): Relayed {
  const handler = RELAY[message.kind] as (
    room: Connections,
    conn: Conn,
    live: LiveState,
    message: WorkerMessage,
  ) => Relayed;
  return handler(room, conn, live, message);
}

const RELAY: Relay = {
  heartbeat(room, conn, live) {
    room.send(conn, { kind: "heartbeat_ack", resume: room.mintResume(live) });
    return "kept";
  },

  event(room, _conn, live, message) {
    const pending = live.pending.get(message.id);
    // Output of a request that timed out, or of one without output: nobody to give it to.
    if (pending?.kind !== "exec" && pending?.kind !== "jupyter") return "kept";
    try {
      pending.onEvent?.(message.event);
    } catch (error) {
      room.settings.log.error("worker gateway: event listener threw", { error: String(error) });
    }
    return "kept";
  },

  kernel_output(room, _conn, live, message) {
    room.emit({
      kind: "KernelOutput",
      allocationId: live.allocationId,
      epoch: live.epoch,
      rank: live.rank,
      cell: message.cell ?? null,
      event: message.event,
    });
    return "kept";
  },

  kernel_status(room, _conn, live, message) {
    // Only a change is news: a worker repeating itself must not drive readiness passes.
    if (
      live.kernel?.state === message.status.state &&
      live.kernel.message === message.status.message
    ) {
      return "kept";
    }
    live.kernel = message.status;
    room.emit({
      kind: "KernelStatus",
      allocationId: live.allocationId,
      epoch: live.epoch,
      rank: live.rank,
      status: message.status,
    });
    return "kept";
  },

  environment_unavailable(room, conn, live, message) {
    room.settings.log.warn("worker gateway: a worker cannot run the session's environment", {
      allocationId: live.allocationId,
      rank: live.rank,
      message: message.message,
    });
    room.emit({
      kind: "EnvironmentUnavailable",
      allocationId: live.allocationId,
      epoch: live.epoch,
      rank: live.rank,
      message: message.message,
    });
    // The worker waits for this before it exits: the report is in once it is answered.
    room.send(conn, { kind: "stop", reason: "the environment cannot run on the worker's node" });
    return "kept";
  },

  response(room, conn, live, message) {
    const pending = live.pending.get(message.id);
    // Unknown ids are answers that came after their request timed out: harmless.
    if (!pending) return "kept";
    const { response } = message;
    if (response.kind !== pending.kind && response.kind !== "error") {
      drop(room, conn, `protocol violation: ${response.kind} answers ${pending.kind}`);
      return "dropped";
    }
    live.pending.delete(message.id);
    pending.cancelTimeout();
    pending.resolve(
      response.kind === "error"
        ? { kind: "WorkerError", message: response.message }
        : { kind: "Answered", response },
    );
    return "kept";
  },
};

/** One request on a live connection: its answer, a timeout, or why it never left. */
export function sendRequest<R extends WorkerRequest>(
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
