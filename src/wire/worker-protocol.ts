/**
 * The wire between the worker gateway (in the daemon) and a worker (on a compute node).
 *
 * Frames: a 4-byte big-endian payload length, then that many bytes of UTF-8 JSON. Both sides
 * cap the length they accept (DEFAULT_MAX_FRAME_BYTES; MAX_CREDENTIAL_FRAME_BYTES for the
 * first frame, read before the peer is authenticated, so an anonymous peer cannot make the
 * gateway buffer a megabyte). A length over the cap, an empty frame, invalid UTF-8 or invalid
 * JSON is a protocol violation: the receiver drops that one connection.
 *
 * The conversation:
 *   worker  → gateway  `credential` (the first frame, and nothing else until the verdict)
 *   gateway → worker   either the raw 7 ASCII bytes `refused` (no frame, no newline) followed
 *                      by a close, or a `welcome` frame. Nothing else is ever sent before the
 *                      credential is verified and its nonce burned. The two answers cannot be
 *                      confused: a frame starts with a length byte of 0x00 (lengths are far
 *                      below 16 MiB), `refused` with 'r' (0x72).
 *   worker  → gateway  `heartbeat` every `heartbeatIntervalMs`; `response` to each request,
 *                      preceded by the `event`s (output, displays) of an `exec`;
 *                      `kernel_output` for output while no request runs;
 *                      `kernel_status` whenever the kernel starts or dies;
 *                      `environment_unavailable` instead of all that when the session's
 *                      environment cannot run on this node (answered `stop`; it exits 1).
 *   gateway → worker   `heartbeat_ack` (carrying a fresh resume credential), `request`, `stop`.
 * Either side treats 3 heartbeat intervals without any frame from the other as a dead
 * connection (LIVENESS_INTERVALS), which catches half-open TCP that no FIN will ever announce.
 *
 * Over 400 lines because it is the protocol: every frame schema in one place, so both sides read the same file.
 */
import * as v from "valibot";
import { type Credential, CredentialSchema } from "./credential.ts";

const FRAME_HEADER_BYTES = 4;
export const DEFAULT_MAX_FRAME_BYTES = 1024 * 1024;
/** The credential frame is about 300 bytes; 4 KiB leaves room without inviting abuse. */
export const MAX_CREDENTIAL_FRAME_BYTES = 4096;
/** A connection silent for this many heartbeat intervals is dead. */
export const LIVENESS_INTERVALS = 3;

/** The whole refusal, on the wire: the same word for every reason (see worker-gateway.ts). */
export const REFUSED = "refused";
export const REFUSED_BYTES: Uint8Array = new TextEncoder().encode(REFUSED);

// ---------------------------------------------------------------------------------------
// Frame codec
// ---------------------------------------------------------------------------------------

const encoder = new TextEncoder();

/** The frame for `message`, or null when its payload would exceed `maxFrameBytes`. */
export function encodeFrame(
  message: unknown,
  maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES,
): Uint8Array | null {
  const payload = encoder.encode(JSON.stringify(message));
  if (payload.length > maxFrameBytes) return null;
  const frame = new Uint8Array(FRAME_HEADER_BYTES + payload.length);
  new DataView(frame.buffer).setUint32(0, payload.length);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

export type DecodeResult =
  /** Zero or more complete frames, each parsed JSON (not yet validated). */
  | { readonly kind: "Frames"; readonly frames: readonly unknown[] }
  | { readonly kind: "Oversized"; readonly length: number }
  | { readonly kind: "Malformed"; readonly message: string };

export interface FrameDecoder {
  /** Feeds received bytes. After an Oversized or Malformed result the decoder stays failed. */
  push(chunk: Uint8Array): DecodeResult;
  /** Bytes received but not yet part of a complete frame. */
  buffered(): number;
}

export function createFrameDecoder(options: { readonly maxFrameBytes: number }): FrameDecoder {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let buffer = new Uint8Array(0);
  let length = 0;
  let failed: DecodeResult | null = null;

  function append(chunk: Uint8Array): void {
    if (length + chunk.length > buffer.length) {
      // Doubling keeps a 1 MiB frame arriving in 64 KiB pieces linear, not quadratic.
      const grown = new Uint8Array(Math.max(length + chunk.length, buffer.length * 2, 256));
      grown.set(buffer.subarray(0, length));
      buffer = grown;
    }
    buffer.set(chunk, length);
    length += chunk.length;
  }

  return {
    push(chunk) {
      if (failed) return failed;
      append(chunk);
      const frames: unknown[] = [];
      let offset = 0;
      while (length - offset >= FRAME_HEADER_BYTES) {
        const size = new DataView(buffer.buffer, buffer.byteOffset + offset, 4).getUint32(0);
        // Judged as soon as the header is in: an oversized frame is refused before we wait
        // for, and buffer, what it announced.
        if (size > options.maxFrameBytes) {
          failed = { kind: "Oversized", length: size };
          return failed;
        }
        if (size === 0) {
          failed = { kind: "Malformed", message: "empty frame" };
          return failed;
        }
        if (length - offset - FRAME_HEADER_BYTES < size) break;
        const start = offset + FRAME_HEADER_BYTES;
        try {
          frames.push(JSON.parse(decoder.decode(buffer.subarray(start, start + size))));
        } catch {
          failed = { kind: "Malformed", message: "frame is not UTF-8 JSON" };
          return failed;
        }
        offset = start + size;
      }
      if (offset > 0) {
        buffer.copyWithin(0, offset, length);
        length -= offset;
        // Give back the room a large frame needed: a thousand idle workers should not each
        // keep a megabyte.
        if (length === 0 && buffer.length > 64 * 1024) buffer = new Uint8Array(0);
      }
      return { kind: "Frames", frames };
    },
    buffered: () => length,
  };
}

// ---------------------------------------------------------------------------------------
// Messages. Validated with valibot on receipt; anything that does not parse is a protocol
// violation. Objects after the handshake are loose (unknown keys ignored) so a newer daemon
// can add a field without dropping older workers; the credential frame is strict.
// ---------------------------------------------------------------------------------------

const count = v.pipe(v.number(), v.safeInteger(), v.minValue(0));

const CredentialFrameSchema = v.pipe(
  v.strictObject({ kind: v.literal("credential"), credential: CredentialSchema }),
  v.readonly(),
);
export type CredentialFrame = v.InferOutput<typeof CredentialFrameSchema>;

const ProbeWorkspaceRequestSchema = v.pipe(
  v.object({
    kind: v.literal("probe_workspace"),
    /** Absolute path of the marker file the daemon wrote into the session's workspace. */
    path: v.string(),
    /** The content the daemon wrote there. */
    expect: v.string(),
  }),
  v.readonly(),
);
const ExecRequestSchema = v.pipe(
  v.object({
    kind: v.literal("exec"),
    code: v.string(),
    /** Names the cell, so a later interrupt reaches this cell and no other. */
    cell: v.optional(v.string()),
    /** Lowers the kernel's per-stream output cap for this cell (never raises it). */
    maxOutputChars: v.optional(count),
  }),
  v.readonly(),
);
const InterruptRequestSchema = v.pipe(
  v.object({
    kind: v.literal("interrupt"),
    /** Only this cell (running: SIGINT; still queued: dropped). Absent: the running cell. */
    cell: v.optional(v.string()),
    /**
     * The interrupt escalates: a cell still running this long after its SIGINT (code stuck
     * in C, or ignoring KeyboardInterrupt) costs the interpreter, which is restarted.
     * Absent: SIGINT only.
     */
    restartAfterMs: v.optional(count),
  }),
  v.readonly(),
);
/** A fresh interpreter in place of the current one: state cleared, the cells it held fail. */
const RestartRequestSchema = v.pipe(v.object({ kind: v.literal("restart") }), v.readonly());

/** A Jupyter shell request (execute, complete, inspect, ...), run by the kernel in turn. */
const JupyterRequestSchema = v.pipe(
  v.object({
    kind: v.literal("jupyter"),
    msgType: v.pipe(v.string(), v.maxLength(100)),
    content: v.record(v.string(), v.unknown()),
    /** The message's binary buffers (a comm message's), base64. */
    buffers: v.optional(v.array(v.string())),
    /** As exec's: names the cell, so an interrupt reaches this one and no other. */
    cell: v.optional(v.string()),
    /** As exec's: lowers the output cap for this request's cell. */
    maxOutputChars: v.optional(count),
  }),
  v.readonly(),
);
/** What the user typed for the running cell's input(); dropped when none is waiting. */
const InputReplyRequestSchema = v.pipe(
  v.object({ kind: v.literal("input_reply"), value: v.string() }),
  v.readonly(),
);

const WorkerRequestSchema = v.variant("kind", [
  ProbeWorkspaceRequestSchema,
  ExecRequestSchema,
  InterruptRequestSchema,
  JupyterRequestSchema,
  InputReplyRequestSchema,
  RestartRequestSchema,
]);
/** What the gateway can ask a worker to do. */
export type WorkerRequest = v.InferOutput<typeof WorkerRequestSchema>;

const ProbeWorkspaceResponseSchema = v.pipe(
  v.object({
    kind: v.literal("probe_workspace"),
    /** The marker exists at `path` and its content equals `expect`. */
    found: v.boolean(),
    /** What the worker read (truncated to 4 KiB), or null when it could not read the file. */
    content: v.nullable(v.string()),
  }),
  v.readonly(),
);
/**
 * A MIME bundle, as Jupyter's `data`: "text/plain" always, "image/png" as base64, JSON as
 * its text. Keys and values are the kernel's (user code chooses them): treat as untrusted.
 */
export const MimeBundleSchema = v.pipe(v.record(v.string(), v.string()), v.readonly());
export type MimeBundle = v.InferOutput<typeof MimeBundleSchema>;

/** What a cell raised: Jupyter's `error` (traceback as one text). */
export const CellErrorSchema = v.pipe(
  v.object({ ename: v.string(), evalue: v.string(), traceback: v.string() }),
  v.readonly(),
);
export type CellError = v.InferOutput<typeof CellErrorSchema>;

/** Jupyter's `stream` and `display_data`, as the cell produces them. */
export const CellEventSchema = v.variant("type", [
  v.pipe(
    v.object({
      type: v.literal("stream"),
      name: v.picklist(["stdout", "stderr"]),
      text: v.string(),
    }),
    v.readonly(),
  ),
  v.pipe(v.object({ type: v.literal("display_data"), data: MimeBundleSchema }), v.readonly()),
  /** The interpreter running this cell is being replaced (an interrupt that did not stop it). */
  v.pipe(
    v.object({
      type: v.literal("kernel"),
      state: v.literal("restarting"),
      message: v.pipe(v.string(), v.maxLength(1000)),
    }),
    v.readonly(),
  ),
  /**
   * A Jupyter message of a `jupyter` request (iopub or stdin) other than a stream, content
   * as the kernel made it: the daemon adds the headers. Untrusted, like everything here.
   */
  v.pipe(
    v.object({
      type: v.literal("jupyter"),
      channel: v.picklist(["iopub", "stdin"]),
      msgType: v.pipe(v.string(), v.maxLength(100)),
      content: v.record(v.string(), v.unknown()),
      metadata: v.optional(v.record(v.string(), v.unknown())),
      /** Binary buffers (a comm message's), base64. */
      buffers: v.optional(v.array(v.string())),
    }),
    v.readonly(),
  ),
]);
export type CellEvent = v.InferOutput<typeof CellEventSchema>;

/** The kernel process as the worker sees it (reported on every change). */
const KernelStatusSchema = v.pipe(
  v.object({
    state: v.picklist(["stopped", "running", "dead"]),
    /**
     * How it died (exit code, signal, OOM where the node says so), or what it is doing. It
     * becomes a condition's message: bounded, as anything a worker says is untrusted.
     */
    message: v.pipe(v.string(), v.maxLength(1000)),
    /**
     * Running, in place of an interpreter that is gone (a death, an interrupt that did not
     * stop its cell, a restart asked for): how that one ended. Absent for the first.
     */
    replaced: v.optional(v.pipe(v.string(), v.maxLength(1000))),
  }),
  v.readonly(),
);
export type KernelStatus = v.InferOutput<typeof KernelStatusSchema>;

const ExecResponseSchema = v.pipe(
  v.object({
    kind: v.literal("exec"),
    status: v.picklist(["OK", "ERROR"]),
    /** The last expression's bundle (Jupyter's execute_result); null when none or None. */
    result: v.nullable(MimeBundleSchema),
    /** What the code raised (or why the kernel could not run it) when status is ERROR. */
    error: v.nullable(CellErrorSchema),
    /** The cell ran in a fresh interpreter: the previous one died and its state is gone. */
    kernelRestarted: v.boolean(),
  }),
  v.readonly(),
);
const InterruptResponseSchema = v.pipe(
  v.object({
    kind: v.literal("interrupt"),
    /** False when the kernel was idle: there was nothing to interrupt. */
    delivered: v.boolean(),
  }),
  v.readonly(),
);
const RestartResponseSchema = v.pipe(
  v.object({
    kind: v.literal("restart"),
    /** A fresh interpreter is running (false: it could not be started; `message` says why). */
    restarted: v.boolean(),
    message: v.pipe(v.string(), v.maxLength(1000)),
  }),
  v.readonly(),
);
const ErrorResponseSchema = v.pipe(
  v.object({ kind: v.literal("error"), message: v.string() }),
  v.readonly(),
);

/** The shell reply of a `jupyter` request (its iopub messages came as events before it). */
const JupyterResponseSchema = v.pipe(
  v.object({
    kind: v.literal("jupyter"),
    msgType: v.pipe(v.string(), v.maxLength(100)),
    content: v.record(v.string(), v.unknown()),
    /** As exec's: this ran in a fresh interpreter because the previous one died. */
    kernelRestarted: v.boolean(),
  }),
  v.readonly(),
);
const InputReplyResponseSchema = v.pipe(
  v.object({
    kind: v.literal("input_reply"),
    /** False when no cell was waiting for input. */
    delivered: v.boolean(),
  }),
  v.readonly(),
);

const WorkerResponseSchema = v.variant("kind", [
  ProbeWorkspaceResponseSchema,
  ExecResponseSchema,
  InterruptResponseSchema,
  RestartResponseSchema,
  ErrorResponseSchema,
  JupyterResponseSchema,
  InputReplyResponseSchema,
]);
export type WorkerResponse = v.InferOutput<typeof WorkerResponseSchema>;
export type ProbeWorkspaceResponse = v.InferOutput<typeof ProbeWorkspaceResponseSchema>;
export type ExecResponse = v.InferOutput<typeof ExecResponseSchema>;
export type InterruptResponse = v.InferOutput<typeof InterruptResponseSchema>;
export type JupyterResponse = v.InferOutput<typeof JupyterResponseSchema>;
/** The worker could not serve the request (e.g. a kind it does not know). */
export type ErrorResponse = v.InferOutput<typeof ErrorResponseSchema>;

/** The response kind that answers request `R`. */
export type ResponseFor<R extends WorkerRequest> = Extract<WorkerResponse, { kind: R["kind"] }>;

const GatewayMessageSchema = v.variant("kind", [
  v.pipe(
    v.object({
      kind: v.literal("welcome"),
      allocationId: v.string(),
      epoch: count,
      rank: count,
      heartbeatIntervalMs: v.pipe(count, v.minValue(1)),
      /** A fresh single-use credential to reconnect with if this connection is lost. */
      resume: CredentialSchema,
    }),
    v.readonly(),
  ),
  v.pipe(v.object({ kind: v.literal("heartbeat_ack"), resume: CredentialSchema }), v.readonly()),
  v.pipe(
    v.object({ kind: v.literal("request"), id: count, request: WorkerRequestSchema }),
    v.readonly(),
  ),
  v.pipe(v.object({ kind: v.literal("stop"), reason: v.string() }), v.readonly()),
]);
/** gateway → worker, after the handshake. */
export type GatewayMessage = v.InferOutput<typeof GatewayMessageSchema>;

const WorkerMessageSchema = v.variant("kind", [
  v.pipe(v.object({ kind: v.literal("heartbeat") }), v.readonly()),
  /** Output of the `exec` request `id`, sent before its `response`, in order. */
  v.pipe(v.object({ kind: v.literal("event"), id: count, event: CellEventSchema }), v.readonly()),
  /**
   * Output while no request runs (a thread a cell started prints on, a widget changes), as
   * it happens. `cell` names the request that ran last (its `cell`), whose output it joins
   * as ipykernel's does; absent when there was none. Dropped while disconnected.
   */
  v.pipe(
    v.object({
      kind: v.literal("kernel_output"),
      cell: v.optional(v.pipe(v.string(), v.maxLength(200))),
      event: CellEventSchema,
    }),
    v.readonly(),
  ),
  /** The kernel started or died: sent at once on every change, and after each welcome. */
  v.pipe(v.object({ kind: v.literal("kernel_status"), status: KernelStatusSchema }), v.readonly()),
  v.pipe(
    v.object({ kind: v.literal("response"), id: count, response: WorkerResponseSchema }),
    v.readonly(),
  ),
  /**
   * The profile's environment cannot run here (its prefix or interpreter is not on this
   * node, a module line failed): no kernel was started, and the worker exits after this.
   * The message names the path or line and the node; it becomes the session's ending
   * message, so it is bounded like everything a worker says.
   */
  v.pipe(
    v.object({
      kind: v.literal("environment_unavailable"),
      message: v.pipe(v.string(), v.minLength(1), v.maxLength(1000)),
    }),
    v.readonly(),
  ),
]);
/** worker → gateway, after the handshake. */
export type WorkerMessage = v.InferOutput<typeof WorkerMessageSchema>;

export function parseGatewayMessage(value: unknown): GatewayMessage | null {
  const result = v.safeParse(GatewayMessageSchema, value);
  return result.success ? result.output : null;
}

export function parseWorkerMessage(value: unknown): WorkerMessage | null {
  const result = v.safeParse(WorkerMessageSchema, value);
  return result.success ? result.output : null;
}

export function parseCredentialFrame(value: unknown): Credential | null {
  const result = v.safeParse(CredentialFrameSchema, value);
  return result.success ? result.output.credential : null;
}
