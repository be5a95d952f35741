/**
 * The worker: what a backend starts on each node of an interactive allocation. It reads the
 * credential for its rank, dials the daemon's worker gateway (retrying with backoff until the
 * credential expires: the daemon may be restarting, the network may still be coming up),
 * and then serves heartbeats, workspace probes and a Python kernel.
 *
 * A refused credential is final: retrying it cannot succeed (a burned nonce stays burned, an
 * old epoch stays old) and would only hammer the gateway. A lost connection is not: the worker
 * keeps its kernel and dials again with the newest resume credential the gateway handed it,
 * for at most the grace period, so a network blip or a daemon restart costs the user nothing.
 * When the grace period runs out the worker exits, and the session is the reconciler's to
 * judge. `stop` from the gateway ends it at once.
 *
 * A session's environment is checked here, on the node, before any dial or kernel
 * (environment-check.ts): one that cannot run is reported to the gateway in place of a
 * kernel, and the worker exits 1, so the session ends naming what is missing and where.
 */
import { type Clock, every, pause, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { type Credential, credentialPath, readCredentialFile } from "../../wire/credential.ts";
import { readGatewayFingerprint } from "../../wire/gateway-tls.ts";
import { parseHostPort } from "../../wire/host-port.ts";
import {
  type CellEvent,
  DEFAULT_MAX_FRAME_BYTES,
  type KernelStatus,
  LIVENESS_INTERVALS,
  parseGatewayMessage,
  type WorkerResponse,
} from "../../wire/worker-protocol.ts";
import { checkEnvironment, reportUnavailable } from "./environment-report.ts";
import { fitEvent, fitResponse } from "./frame-fit.ts";
import { dialGateway, type GatewayTarget, type Link, type Welcome } from "./gateway-link.ts";
import { createKernel, type Kernel } from "./kernel.ts";
import type { KernelEnvironment } from "./kernel-launch.ts";
import { handle } from "./worker-requests.ts";

export interface WorkerOptions {
  readonly credentialDir: string;
  readonly rank: number;
  /** How long a lost connection may stay lost before the worker gives up and exits. */
  readonly graceMs: number;
  /** The Python 3 executable for the kernel. */
  readonly python: string;
  /** The profile's environment the session chose (its prefix and module lines). */
  readonly environment?: KernelEnvironment;
  /**
   * The environment's name: given, the environment (`python`, the prefix, the module lines)
   * is checked on this node before the kernel starts. Absent: the node's own python3.
   */
  readonly environmentName?: string;
  /** This node's name, for what the worker reports (default: the host name). */
  readonly node?: string;
  /** Dial the gateway at this unix socket instead of the credential's TCP address. */
  readonly gatewaySocket?: string;
  readonly log: Log;
  readonly clock: Clock;
  /** Every wait of the worker (heartbeats, kernel escalation, dial and check deadlines). */
  readonly timers: Timers;
  /** Dial retries start 100 ms apart and double up to this (default 3000). */
  readonly maxBackoffMs?: number;
  /** Connect-to-verdict limit per dial attempt (default 30 s). */
  readonly verdictTimeoutMs?: number;
  readonly maxFrameBytes?: number;
  /** A cell's output sent per stream (the profile's cap); absent: the kernel's default. */
  readonly maxOutputChars?: number;
}

export type WorkerExit =
  /** Told to stop by the gateway, or by a signal. */
  | { readonly kind: "Stopped"; readonly reason: string }
  /** The gateway refused the credential. */
  | { readonly kind: "Refused" }
  /** Never got a verdict before the credential expired. */
  | { readonly kind: "Unreachable"; readonly message: string }
  /** Was connected, lost it, and could not resume within the grace period. */
  | { readonly kind: "Lost"; readonly message: string }
  /** No usable credential file: a configuration problem, not a runtime one. */
  | { readonly kind: "BadCredential"; readonly message: string }
  /** The gateway's certificate is not the pinned one: nothing was sent to it. */
  | { readonly kind: "WrongCertificate"; readonly message: string }
  /** The session's environment cannot run on this node (reported to the gateway). */
  | { readonly kind: "EnvironmentUnavailable"; readonly message: string };

export function workerExitCode(exit: WorkerExit): number {
  switch (exit.kind) {
    case "Stopped":
      return 0;
    case "Refused":
    case "Unreachable":
    case "Lost":
    case "WrongCertificate":
    case "EnvironmentUnavailable":
      return 1;
    case "BadCredential":
      return 2;
    default: {
      const never: never = exit;
      throw new Error(`unhandled worker exit ${JSON.stringify(never)}`);
    }
  }
}

const FIRST_BACKOFF_MS = 100;

/**
 * The longest pause between dials while resuming a connection that was up: a user's kernel
 * waits on it. With 3 s (the first dial's cap), a daemon restart left a kernel unreachable
 * for up to 3 s after the new daemon answered, and a client's retry backoff stacked on top
 * (issue 30). A refused connect every second is nothing for a daemon that is down.
 */
const RESUME_MAX_BACKOFF_MS = 1000;

export async function runWorker(options: WorkerOptions, signal: AbortSignal): Promise<WorkerExit> {
  const { log, clock, rank } = options;
  const start = await readStart(options);
  if (start.kind !== "Ready") return start;
  const { initial, gateway, address, pin, unavailable } = start;
  log.info("worker: starting", {
    allocationId: initial.allocationId,
    epoch: initial.epoch,
    rank,
    gateway: options.gatewaySocket ?? gateway,
    tls: pin !== undefined,
  });
  // The kernel outlives connections; its status goes to whichever one is current, at once.
  let reportStatus: ((status: KernelStatus) => void) | null = null;
  // Output between cells goes to the current connection at once; none: Jupyter drops iopub
  // nobody listens to, and the kernel keeps it for the next plain exec anyway.
  let reportOutput: ((event: CellEvent, cell: string | undefined) => void) | null = null;
  const kernel = createKernel({
    python: options.python,
    ...(options.maxOutputChars !== undefined && { maxOutputChars: options.maxOutputChars }),
    ...(options.environment === undefined ? {} : { environment: options.environment }),
    log,
    timers: options.timers,
    onStatus: (status) => reportStatus?.(status),
    onIdleEvent: (event, cell) => reportOutput?.(event, cell),
  });
  try {
    let credential = initial;
    let deadline = initial.expiresAt;
    let everConnected = false;
    for (;;) {
      const dialed = await dialUntil(
        options,
        { address, credential, deadline, pin, resuming: everConnected },
        signal,
      );
      switch (dialed.kind) {
        case "Aborted":
          return { kind: "Stopped", reason: "signal" };
        case "Expired":
          return everConnected
            ? { kind: "Lost", message: `could not resume within the grace period: ${dialed.last}` }
            : {
                kind: "Unreachable",
                message: `no verdict before the credential expired: ${dialed.last}`,
              };
        case "Refused":
          return { kind: "Refused" };
        case "WrongCertificate":
          return dialed;
        case "Welcomed": {
          if (unavailable !== null) return await reportUnavailable(dialed.link, unavailable);
          if (!everConnected) kernel.start(); // a refused worker never pays for Python
          everConnected = true;
          log.info("worker: connected", {
            heartbeatIntervalMs: dialed.welcome.heartbeatIntervalMs,
          });
          reportStatus = (status) => dialed.link.send({ kind: "kernel_status", status });
          const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
          reportOutput = (event, cell) =>
            dialed.link.send({
              kind: "kernel_output",
              ...(cell !== undefined && { cell: cell.slice(0, 200) }),
              event: fitEvent(event, maxFrameBytes),
            });
          // A death while disconnected (or before this daemon started) is news to this one.
          reportStatus(kernel.status());
          const ended = await serve(options, dialed.link, dialed.welcome, kernel, signal);
          reportStatus = null;
          reportOutput = null;
          if (ended.kind === "Stopped") return ended;
          credential = ended.resume;
          deadline = Math.min(clock.now() + options.graceMs, ended.resume.expiresAt);
          log.warn("worker: connection lost; trying to resume", {
            reason: ended.reason,
            graceMs: options.graceMs,
          });
          break;
        }
        default: {
          const never: never = dialed;
          throw new Error(`unhandled dial result ${JSON.stringify(never)}`);
        }
      }
    }
  } finally {
    await kernel.close();
  }
}

type Start =
  | {
      readonly kind: "Ready";
      readonly initial: Credential;
      /** The gateway address the credential names. */
      readonly gateway: string;
      readonly address: GatewayTarget;
      /** The certificate fingerprint to pin; undefined without TLS. */
      readonly pin: string | undefined;
      /** What keeps the session's environment from running on this node, or null. */
      readonly unavailable: string | null;
    }
  | Extract<WorkerExit, { readonly kind: "BadCredential" }>;

/**
 * This rank's credential, the gateway it names (or the socket given) and the pin; then the
 * session's environment checked on this node, before the first dial: its module lines may
 * take longer than the gateway waits for a heartbeat, and a worker with nothing to run has
 * nothing to serve.
 */
async function readStart(options: WorkerOptions): Promise<Start> {
  const { rank } = options;
  const read = readCredentialFile(credentialPath(options.credentialDir, rank));
  if (read.kind !== "Read") return { kind: "BadCredential", message: read.message };
  const { credential: initial, gateway } = read.file;
  if (initial.rank !== rank) {
    return {
      kind: "BadCredential",
      message: `the credential file for rank ${rank} holds a credential for rank ${initial.rank}`,
    };
  }
  const pinned = readGatewayFingerprint(options.credentialDir);
  if (pinned.kind === "Invalid") return { kind: "BadCredential", message: pinned.message };
  const pin = pinned.kind === "Pinned" ? pinned.fingerprint : undefined;
  const tcp = parseHostPort(gateway);
  const address: GatewayTarget | null =
    options.gatewaySocket !== undefined ? { unix: options.gatewaySocket } : tcp;
  if (!address || ("port" in address && address.port === 0)) {
    return { kind: "BadCredential", message: `the credential names no usable gateway address` };
  }
  return {
    kind: "Ready",
    initial,
    gateway,
    address,
    pin,
    unavailable: await checkEnvironment(options),
  };
}

type DialUntilResult =
  | { readonly kind: "Welcomed"; readonly welcome: Welcome; readonly link: Link }
  | { readonly kind: "Refused" }
  | { readonly kind: "WrongCertificate"; readonly message: string }
  | { readonly kind: "Expired"; readonly last: string }
  | { readonly kind: "Aborted" };

/** Dials until a verdict, the deadline, or the signal; backoff doubles, with jitter. */
async function dialUntil(
  options: WorkerOptions,
  target: {
    readonly address: GatewayTarget;
    readonly credential: Credential;
    readonly deadline: number;
    readonly pin: string | undefined;
    readonly resuming: boolean;
  },
  signal: AbortSignal,
): Promise<DialUntilResult> {
  const { address, credential, deadline, pin } = target;
  const cap = options.maxBackoffMs ?? 3000;
  const maxBackoffMs = target.resuming ? Math.min(cap, RESUME_MAX_BACKOFF_MS) : cap;
  let backoffMs = FIRST_BACKOFF_MS;
  let last = "not tried";
  for (let attempt = 1; ; attempt++) {
    if (signal.aborted) return { kind: "Aborted" };
    const remainingMs = deadline - options.clock.now();
    if (remainingMs <= 0) return { kind: "Expired", last };
    const outcome = await dialGateway(address, credential, {
      verdictTimeoutMs: Math.min(options.verdictTimeoutMs ?? 30_000, remainingMs),
      timers: options.timers,
      ...(options.maxFrameBytes !== undefined && { maxFrameBytes: options.maxFrameBytes }),
      ...(pin !== undefined && { pin }),
    });
    if (outcome.kind !== "Failed") return outcome;
    last = outcome.message;
    // The first failure and then every tenth: a long queue wait must not flood the job log.
    if (attempt % 10 === 1) {
      options.log.info("worker: gateway not reachable yet", { attempt, message: last });
    }
    const jittered = backoffMs * (0.8 + 0.4 * Math.random());
    await pause(Math.min(jittered, Math.max(0, deadline - options.clock.now())), signal);
    backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
  }
}

type ServeEnd =
  | { readonly kind: "Stopped"; readonly reason: string }
  | { readonly kind: "Lost"; readonly reason: string; readonly resume: Credential };

/** Serves one connection until the gateway says stop or the connection is gone. */
function serve(
  options: WorkerOptions,
  link: Link,
  welcome: Welcome,
  kernel: Kernel,
  signal: AbortSignal,
): Promise<ServeEnd> {
  const { clock } = options;
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const intervalMs = welcome.heartbeatIntervalMs;
  return new Promise<ServeEnd>((resolve) => {
    let resume = welcome.resume;
    let lastHeardAt = clock.now();
    let ended = false;
    const end = (result: ServeEnd) => {
      if (ended) return;
      ended = true;
      stopBeat();
      signal.removeEventListener("abort", onAbort);
      resolve(result);
    };
    const onAbort = () => {
      link.terminate();
      end({ kind: "Stopped", reason: "signal" });
    };
    signal.addEventListener("abort", onAbort, { once: true });
    const stopBeat = every(options.timers, intervalMs, () => {
      // A half-open connection announces nothing; silence is how we notice it.
      if (clock.now() - lastHeardAt > LIVENESS_INTERVALS * intervalMs) {
        link.terminate();
        end({ kind: "Lost", reason: "the gateway went silent", resume });
        return;
      }
      link.send({ kind: "heartbeat" });
    });

    const reply = (id: number, response: WorkerResponse) => {
      if (ended) return;
      link.send({ kind: "response", id, response: fitResponse(id, response, maxFrameBytes) });
    };

    link.attach({
      onFrame(frame) {
        lastHeardAt = clock.now();
        const message = parseGatewayMessage(frame);
        if (!message) {
          // A newer daemon may ask for something this worker does not know: answer that,
          // rather than dropping a connection that is otherwise fine.
          const id = unknownRequestId(frame);
          if (id !== null) reply(id, { kind: "error", message: "unsupported request" });
          else options.log.warn("worker: ignoring an unknown frame from the gateway");
          return;
        }
        switch (message.kind) {
          case "welcome":
            return; // only ever the first frame; a repeat changes nothing
          case "heartbeat_ack":
            resume = message.resume;
            return;
          case "request":
            void handle(message.request, kernel, (event) => {
              if (ended) return;
              link.send({ kind: "event", id: message.id, event: fitEvent(event, maxFrameBytes) });
            }).then((response) => reply(message.id, response));
            return;
          case "stop":
            options.log.info("worker: stopped by the gateway", { reason: message.reason });
            // Ended first: closing our side may report the close synchronously, and this
            // connection is stopped, not lost.
            end({ kind: "Stopped", reason: message.reason });
            link.end();
            return;
          default: {
            const never: never = message;
            throw new Error(`unhandled gateway message ${JSON.stringify(never)}`);
          }
        }
      },
      onClose(reason) {
        end({ kind: "Lost", reason, resume });
      },
    });
  });
}

function unknownRequestId(frame: unknown): number | null {
  if (typeof frame !== "object" || frame === null) return null;
  const { kind, id } = frame as { kind?: unknown; id?: unknown };
  return kind === "request" && Number.isSafeInteger(id) && (id as number) >= 0
    ? (id as number)
    : null;
}
