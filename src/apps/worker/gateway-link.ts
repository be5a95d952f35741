/**
 * One dial from the worker to the worker gateway: connect, present the credential as the first
 * (and only) frame, and read the verdict, which is either the raw bytes `refused` or a
 * `welcome` frame (see worker-protocol.ts). Welcomed, the socket becomes a Link that carries
 * frames both ways until it closes.
 */
import type { Socket, SocketHandler } from "bun";
import type { Timers } from "../../lib/clock.ts";
import type { Credential } from "../../wire/credential.ts";
import type { HostPort } from "../../wire/host-port.ts";
import { createSocketWriter, type SocketWriter } from "../../wire/socket-writer.ts";
import {
  createFrameDecoder,
  DEFAULT_MAX_FRAME_BYTES,
  encodeFrame,
  type GatewayMessage,
  MAX_CREDENTIAL_FRAME_BYTES,
  parseGatewayMessage,
  REFUSED_BYTES,
  type WorkerMessage,
} from "../../wire/worker-protocol.ts";

export type Welcome = Extract<GatewayMessage, { kind: "welcome" }>;

/**
 * Where the gateway is: its TCP address from the credential, or (a job without network, on
 * the daemon's own machine) its unix socket bound into the sandbox. Same protocol, same pin.
 */
export type GatewayTarget = HostPort | { readonly unix: string };

export interface LinkHandlers {
  /** Every frame after `welcome`, parsed JSON but not validated (that is the reader's job). */
  onFrame(frame: unknown): void;
  /** Called once, when the connection is gone for whatever reason. */
  onClose(reason: string): void;
}

export interface Link {
  /** False when the frame would exceed the cap or the connection is gone. */
  send(message: WorkerMessage): boolean;
  /** Starts delivery; frames (and a close) that arrived before are delivered now. */
  attach(handlers: LinkHandlers): void;
  /** Flushes what is queued, then closes our side. */
  end(): void;
  /** Cuts the connection now. */
  terminate(): void;
}

export type DialOutcome =
  | { readonly kind: "Welcomed"; readonly welcome: Welcome; readonly link: Link }
  /** The gateway said `refused`: this credential will never be accepted. Do not retry it. */
  | { readonly kind: "Refused" }
  /** No verdict (unreachable, closed early, too slow): the same credential may be tried again. */
  | { readonly kind: "Failed"; readonly message: string }
  /**
   * TLS, and the peer's certificate is not the pinned one: an impostor (or a daemon that lost
   * its state). Nothing was sent to it, the credential least of all.
   */
  | { readonly kind: "WrongCertificate"; readonly message: string };

export interface DialOptions {
  /** From connect to verdict; must exceed the gateway's handshake timeout plus its floor. */
  readonly verdictTimeoutMs: number;
  /** Where the verdict deadline waits (from the worker's entry point). */
  readonly timers: Timers;
  readonly maxFrameBytes?: number;
  /**
   * The SHA-256 fingerprint ("AB:CD:...") of the gateway's certificate: dial with TLS and
   * talk only to that certificate. Absent: plain TCP (the daemon's explicit opt-out).
   */
  readonly pin?: string;
}

const MAX_PENDING_WRITE_BYTES = 8 * 1024 * 1024;
const REFUSED_FIRST_BYTE = REFUSED_BYTES[0]!;

type LinkState =
  | { readonly phase: "verdict"; readonly refusal: number[] }
  | { readonly phase: "live" }
  | { readonly phase: "closed" };

export function dialGateway(
  address: GatewayTarget,
  credential: Credential,
  options: DialOptions,
): Promise<DialOutcome> {
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const decoder = createFrameDecoder({ maxFrameBytes });
  const backlog: unknown[] = [];
  let state: LinkState = { phase: "verdict", refusal: [] };
  let socket: Socket<undefined> | null = null;
  let writer: SocketWriter | null = null;
  let handlers: LinkHandlers | null = null;
  let closeReason: string | null = null;

  return new Promise<DialOutcome>((resolve) => {
    let settled = false;
    const settle = (outcome: DialOutcome) => {
      if (settled) return;
      settled = true;
      cancelTimer();
      resolve(outcome);
    };
    const cancelTimer = options.timers.after(options.verdictTimeoutMs, () => {
      settle({ kind: "Failed", message: "no verdict from the gateway in time" });
      closed("verdict timeout");
      socket?.terminate();
    });

    const link: Link = {
      send(message) {
        if (state.phase !== "live" || !writer) return false;
        const frame = encodeFrame(message, maxFrameBytes);
        return frame !== null && writer.write(frame);
      },
      attach(next) {
        handlers = next;
        for (const frame of backlog.splice(0)) next.onFrame(frame);
        if (closeReason !== null) next.onClose(closeReason);
      },
      end() {
        writer?.endWhenFlushed();
      },
      terminate() {
        socket?.terminate();
        closed("closed by worker");
      },
    };

    function closed(reason: string): void {
      if (state.phase === "closed") return;
      const wasLive = state.phase === "live";
      state = { phase: "closed" };
      if (!wasLive) {
        settle({ kind: "Failed", message: `connection ${reason} before a verdict` });
        return;
      }
      closeReason = reason;
      handlers?.onClose(reason);
    }

    function deliver(frames: readonly unknown[]): void {
      for (const frame of frames) {
        if (state.phase !== "live") return;
        if (handlers) handlers.onFrame(frame);
        else backlog.push(frame);
      }
    }

    function onVerdictBytes(current: { refusal: number[] }, chunk: Uint8Array): void {
      if (current.refusal.length > 0 || chunk[0] === REFUSED_FIRST_BYTE) {
        // The refusal is raw bytes, not a frame: collect exactly `refused`.
        current.refusal.push(...chunk.subarray(0, REFUSED_BYTES.length));
        const prefixOk = current.refusal.every((b, i) => b === REFUSED_BYTES[i]);
        if (!prefixOk || chunk.length > REFUSED_BYTES.length) {
          settle({ kind: "Failed", message: "the gateway sent something unintelligible" });
          link.terminate();
        } else if (current.refusal.length === REFUSED_BYTES.length) {
          state = { phase: "closed" };
          settle({ kind: "Refused" });
          socket?.end();
        }
        return;
      }
      const result = decoder.push(chunk);
      if (result.kind !== "Frames") {
        settle({ kind: "Failed", message: `bad verdict from the gateway (${result.kind})` });
        link.terminate();
        return;
      }
      const [first, ...rest] = result.frames;
      if (first === undefined) return;
      const welcome = parseGatewayMessage(first);
      if (welcome?.kind !== "welcome") {
        settle({ kind: "Failed", message: "the gateway's first frame is not a welcome" });
        link.terminate();
        return;
      }
      state = { phase: "live" };
      settle({ kind: "Welcomed", welcome, link });
      deliver(rest);
    }

    function sendCredential(): void {
      const frame = encodeFrame({ kind: "credential", credential }, MAX_CREDENTIAL_FRAME_BYTES);
      if (!frame) throw new Error("a credential frame exceeds its cap"); // a bug: fixed sizes
      writer?.write(frame);
    }

    const socketHandler: SocketHandler<undefined> = {
      binaryType: "uint8array",
      open(s) {
        socket = s;
        if (settled) {
          // Connected after we gave up on this attempt: presenting the credential now would
          // only burn it behind our back.
          s.terminate();
          return;
        }
        s.setNoDelay(true);
        writer = createSocketWriter(s, { maxPendingBytes: MAX_PENDING_WRITE_BYTES });
        // With TLS the credential waits for the pinned certificate (see `handshake`).
        if (options.pin === undefined) sendCredential();
      },
      handshake(s, _chainTrusted, _chainError) {
        // The chain is not what we trust (the certificate is self-signed); the pin is.
        const presented = (
          s as unknown as { getPeerCertificate(): { fingerprint256?: string } | undefined }
        ).getPeerCertificate()?.fingerprint256;
        if (presented !== options.pin) {
          state = { phase: "closed" };
          settle({
            kind: "WrongCertificate",
            message: `the gateway presented certificate ${presented ?? "(none)"}, not the pinned ${options.pin}`,
          });
          s.terminate();
          return;
        }
        sendCredential();
      },
      data(_s, chunk) {
        const current = state;
        switch (current.phase) {
          case "verdict":
            return onVerdictBytes(current, chunk);
          case "live": {
            const result = decoder.push(chunk);
            if (result.kind === "Frames") return deliver(result.frames);
            link.terminate();
            return closed(`protocol violation from the gateway (${result.kind})`);
          }
          case "closed":
            return;
          default: {
            const never: never = current;
            throw new Error(`unhandled link state ${JSON.stringify(never)}`);
          }
        }
      },
      drain() {
        writer?.flush();
      },
      close() {
        closed("closed by the gateway");
      },
      error(_s, error) {
        closed(`failed: ${error.message}`);
      },
      connectError(_s, error) {
        settle({ kind: "Failed", message: `cannot connect: ${error.message}` });
      },
    };
    const tls = options.pin !== undefined && { tls: { rejectUnauthorized: false } };
    const connecting =
      "unix" in address
        ? Bun.connect<undefined>({ unix: address.unix, ...tls, socket: socketHandler })
        : Bun.connect<undefined>({
            hostname: address.hostname,
            port: address.port,
            ...tls,
            socket: socketHandler,
          });
    connecting.catch((error: unknown) => {
      settle({ kind: "Failed", message: `cannot connect: ${String(error)}` });
    });
  });
}
