/**
 * What the worker gateway offers the rest of the daemon (the sessions engine, readiness, the
 * service): expectations it is given, events it emits, the outcomes of its calls, and whether
 * it listens at all (`OPENAI4S_WORKER_LISTEN`). The gateway itself is worker-gateway.ts.
 */

import { formatHostPort, parseHostPort } from "../../wire/host-port.ts";
import type {
  CellEvent,
  KernelStatus,
  ResponseFor,
  WorkerRequest,
  WorkerResponse,
} from "../../wire/worker-protocol.ts";

/** What the daemon currently expects of an allocation's workers. */
export interface GatewayExpectation {
  /** The allocation's epoch: a credential for any other epoch is refused. */
  readonly epoch: number;
  /** Number of workers: valid ranks are 0 .. ranks-1. */
  readonly ranks: number;
  /** The allocation is being stopped (STOPPING) or is over: every credential is refused. */
  readonly fenced: boolean;
}

export interface GatewayExpectations {
  /**
   * The expectation for an allocation, or null when the daemon expects no workers for it.
   * Synchronous on purpose: verdict, nonce burn and registration happen in one turn of the
   * event loop, so two connections cannot both pass the checks before either is recorded.
   * Called for every judged credential, genuine or not (equal work on every path).
   */
  lookup(allocationId: string): GatewayExpectation | null;
}

export type GatewayEvent =
  | {
      readonly kind: "WorkerConnected";
      readonly allocationId: string;
      readonly epoch: number;
      readonly rank: number;
    }
  | {
      readonly kind: "WorkerDisconnected";
      readonly allocationId: string;
      readonly epoch: number;
      readonly rank: number;
      /** For logs: "closed by peer", "heartbeat timeout", "stopped", "replaced", ... */
      readonly reason: string;
    }
  /** Someone was refused. Deliberately carries no reason (see the module comment). */
  | { readonly kind: "CredentialRefused"; readonly remoteAddress: string }
  /**
   * A worker's kernel produced output while no request ran (a thread a cell started, a
   * widget): `cell` names the request that ran last, whose output it belongs to.
   */
  | {
      readonly kind: "KernelOutput";
      readonly allocationId: string;
      readonly epoch: number;
      readonly rank: number;
      readonly cell: string | null;
      readonly event: CellEvent;
    }
  /** A worker reported its kernel started or died (at once: the worker watches it). */
  | {
      readonly kind: "KernelStatus";
      readonly allocationId: string;
      readonly epoch: number;
      readonly rank: number;
      readonly status: KernelStatus;
    }
  /**
   * A worker found the session's environment unusable on its node (a path missing, a module
   * line failing) and exits without a kernel: `message` names what and where. Untrusted
   * text, bounded by the protocol.
   */
  | {
      readonly kind: "EnvironmentUnavailable";
      readonly allocationId: string;
      readonly epoch: number;
      readonly rank: number;
      readonly message: string;
    };

export interface WorkerConnectionInfo {
  readonly remoteAddress: string;
  /** Injected-clock milliseconds. */
  readonly connectedAt: number;
  /** Last frame of any kind from the worker (heartbeats included). Never user activity. */
  readonly lastSeenAt: number;
  /** What the worker last said of its kernel; null until it said anything. */
  readonly kernel: KernelStatus | null;
}

export interface RequestOptions {
  /** An exec's output events, in order, before its answer. */
  readonly onEvent?: (event: CellEvent) => void;
}

export type RequestOutcome<T extends WorkerResponse> =
  | { readonly kind: "Answered"; readonly response: T }
  /** The worker answered that it could not serve the request. */
  | { readonly kind: "WorkerError"; readonly message: string }
  /** No live connection for that (allocation, epoch, rank). Nothing was sent. */
  | { readonly kind: "NotConnected" }
  /** The request's frame would exceed the frame cap. Nothing was sent. */
  | { readonly kind: "TooLarge"; readonly bytes: number }
  /** No answer in time. The request may still be running on the worker. */
  | { readonly kind: "TimedOut" }
  /** The connection went away before the answer came. */
  | { readonly kind: "Disconnected" };

export type WaitOutcome =
  | { readonly kind: "Connected" }
  | { readonly kind: "Aborted" }
  | { readonly kind: "Closed" };

export interface WorkerGateway {
  /** HOST:PORT workers must dial: what goes into credential files (`gatewayAddress`). */
  readonly address: string;
  /** Ranks of (allocationId, epoch) with a live, authenticated connection. */
  connected(allocationId: string, epoch: number): ReadonlySet<number>;
  connection(allocationId: string, epoch: number, rank: number): WorkerConnectionInfo | null;
  /**
   * Resolves Connected once ranks 0 .. ranks-1 of exactly this epoch are all connected at the
   * same time (at once, if they already are); Aborted when `signal` aborts; Closed when the
   * gateway closes.
   */
  waitForRanks(
    allocationId: string,
    epoch: number,
    ranks: number,
    signal?: AbortSignal,
  ): Promise<WaitOutcome>;
  /**
   * Sends a request to one worker and waits for its answer. Never rejects. Requests to one
   * worker run concurrently, except that its kernel runs one `exec` at a time, in order.
   */
  request<R extends WorkerRequest>(
    allocationId: string,
    epoch: number,
    rank: number,
    request: R,
    timeoutMs: number,
    options?: RequestOptions,
  ): Promise<RequestOutcome<ResponseFor<R>>>;
  /**
   * Tells every connected worker of (allocationId, epoch) to exit, and refuses that pair's
   * credentials from now on (also resume credentials). Returns how many workers were told.
   * Workers not connected at this moment learn it when they try to resume and are refused.
   */
  stop(allocationId: string, epoch: number, reason: string): number;
  /**
   * Stops listening and drops every connection WITHOUT telling workers to stop: a daemon
   * restart must not kill sessions. Workers reconnect (resume) to the next gateway.
   */
  close(): Promise<void>;
}

export type WorkerListenSetting =
  | { readonly kind: "Disabled" }
  /** `listen` is a validated HOST:PORT for `WorkerGatewayOptions.listen`. */
  | { readonly kind: "Enabled"; readonly listen: string }
  | { readonly kind: "Invalid"; readonly message: string };

export const WORKER_LISTEN_ENV = "OPENAI4S_WORKER_LISTEN";

/** Reads `OPENAI4S_WORKER_LISTEN`. Unset or empty: Disabled; the gateway stays closed. */
export function workerGatewayListenFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): WorkerListenSetting {
  const raw = env[WORKER_LISTEN_ENV];
  if (raw === undefined || raw === "") return { kind: "Disabled" };
  const parsed = parseHostPort(raw);
  if (!parsed) {
    return {
      kind: "Invalid",
      message: `${WORKER_LISTEN_ENV}=${JSON.stringify(raw)} is not HOST:PORT (or [IPV6]:PORT)`,
    };
  }
  return { kind: "Enabled", listen: formatHostPort(parsed) };
}
