/**
 * The sessions engine as the Jupyter gateway (servers/http/jupyter/) needs it: where a
 * session's kernel stands, a Jupyter shell request run by its kernel (rank 0 of the current
 * attempt), the answer to an input() prompt, and a restart. The websocket and the REST routes
 * are the server's; headers and channels too. The kernel answers with contents only.
 *
 * Output between requests (a thread a cell started, a widget changed from one) comes from the
 * gateway's KernelOutput events, fed in by the composition (`kernelOutput`), and goes to the
 * listeners (`onOutput`) under the session it belongs to: rank 0 of its current attempt only.
 */
import type { Log } from "../../lib/log.ts";
import type { CellEvent } from "../../wire/worker-protocol.ts";
import type { Allocation } from "../models.ts";
import { isTerminal } from "../models.ts";
import type { SessionStore } from "../ports/session-store.ts";
import type { GatewayEvent, WorkerGateway } from "../ports/worker-gateway.ts";
import { codeMayRun, runningCurrentAllocation } from "./code-may-run.ts";
import { restartKernel } from "./restart-kernel.ts";
import type { StandingSignal } from "./standing-signal.ts";

export type KernelStanding =
  /** READY (or only its interpreter died: the next request starts a fresh one). */
  | { readonly kind: "Ready" }
  /** Queued, starting, or not READY yet: requests wait. */
  | { readonly kind: "Starting"; readonly message: string }
  /** Stopping or ended: nothing will run here again. */
  | { readonly kind: "Dead"; readonly message: string }
  | { readonly kind: "NotFound" };

export type JupyterOutcome =
  | {
      readonly kind: "Reply";
      readonly msgType: string;
      readonly content: Readonly<Record<string, unknown>>;
      /** The previous interpreter had died: this ran in a fresh one, state lost. */
      readonly kernelRestarted: boolean;
    }
  /** Not READY (any more): the caller waits, or tells the client. */
  | { readonly kind: "NotReady"; readonly message: string }
  | { readonly kind: "NotFound" };

export type RestartOutcome =
  | { readonly kind: "Restarted" }
  | { readonly kind: "Failed"; readonly message: string }
  | { readonly kind: "NotReady"; readonly message: string }
  | { readonly kind: "NotFound" };

export interface JupyterRequestOptions {
  /** The request's iopub and stdin messages (and streams), in order, before the reply. */
  readonly onEvent?: (event: CellEvent) => void;
  /** Names the request, as exec's cell does. */
  readonly cell?: string;
  /** The request's binary buffers (a comm message's), base64. */
  readonly buffers?: readonly string[];
  /** As exec's: this cell's output cap, when lower than the profile's. */
  readonly maxOutputChars?: number;
}

export interface JupyterService {
  standing(workloadId: string): KernelStanding;
  /**
   * Resolves when `workloadId`'s standing may have changed (the readiness pass told it), or
   * at once when `signal` aborts: the caller reads `standing` again.
   */
  standingChanged(workloadId: string, signal?: AbortSignal): Promise<void>;
  request(
    workloadId: string,
    msgType: string,
    content: Readonly<Record<string, unknown>>,
    options?: JupyterRequestOptions,
  ): Promise<JupyterOutcome>;
  /** The running cell's input() gets `value`; false when none waits (or not READY). */
  inputReply(workloadId: string, value: string): Promise<boolean>;
  restart(workloadId: string): Promise<RestartOutcome>;
  /**
   * Output while no request of the session runs, with the name (`cell`) of the request that
   * ran last. Returns the unsubscribe.
   */
  onOutput(listener: OutputListener): () => void;
  /** The gateway's news of such output (the composition passes each one on). */
  kernelOutput(event: KernelOutputEvent): void;
}

export type KernelOutputEvent = Extract<GatewayEvent, { readonly kind: "KernelOutput" }>;
export type OutputListener = (workloadId: string, cell: string | null, event: CellEvent) => void;

/**
 * No fixed limit on a Jupyter request: a cell runs as long as the session lets it (the
 * client interrupts, the lifetime and idle clocks end it). The largest delay a timer takes.
 */
const NO_LIMIT_MS = 2_147_483_647;
/** An input reply is a write to a pipe in the worker. */
const CONTROL_TIMEOUT_MS = 30_000;

export function createJupyterService(deps: {
  readonly store: SessionStore;
  readonly gateway: Pick<WorkerGateway, "request">;
  readonly log: Log;
  /** Told by the readiness pass when a kernel's standing may have changed. */
  readonly standingSignal: Pick<StandingSignal, "changed">;
  /** A worker was found gone: readiness is re-evaluated at once. */
  readonly onWorkerLost?: () => void;
}): JupyterService {
  const { store, gateway } = deps;
  const listeners = new Set<OutputListener>();

  type NotLocated = Exclude<KernelStanding, { kind: "Ready" }>;

  function locate(
    workloadId: string,
  ): { readonly kind: "Located"; readonly allocation: Allocation } | NotLocated {
    const workload = store.getWorkload(workloadId);
    if (workload?.kind !== "SESSION") return { kind: "NotFound" };
    if (isTerminal(workload.phase)) {
      return { kind: "Dead", message: `the session is ${workload.phase}` };
    }
    if (workload.desired.kind === "STOP") {
      return { kind: "Dead", message: `the session is stopping (${workload.desired.reason})` };
    }
    const may = codeMayRun(store, workloadId);
    if (may.kind === "No") {
      return { kind: "Starting", message: `the session is ${workload.phase} (${may.why})` };
    }
    const current = runningCurrentAllocation(store, workload);
    if (current === null) {
      return { kind: "Starting", message: "the session's allocation is not running" };
    }
    return { kind: "Located", allocation: current };
  }

  function notReady(located: NotLocated) {
    return located.kind === "NotFound"
      ? ({ kind: "NotFound" } as const)
      : ({ kind: "NotReady", message: located.message } as const);
  }

  return {
    onOutput(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    kernelOutput(event) {
      // Only the kernel the requests go to; a superseded attempt's worker says nothing here.
      if (event.rank !== 0) return;
      const allocation = store.getAllocation(event.allocationId);
      if (allocation === null || allocation.epoch !== event.epoch) return;
      const workload = store.getWorkload(allocation.workloadId);
      if (workload?.kind !== "SESSION" || workload.executionEpoch !== event.epoch) return;
      for (const listener of listeners) {
        try {
          listener(workload.id, event.cell, event.event);
        } catch (error) {
          deps.log.error("jupyter: output listener failed", { error: String(error) });
        }
      }
    },

    standing(workloadId) {
      const located = locate(workloadId);
      return located.kind === "Located" ? { kind: "Ready" } : located;
    },

    standingChanged: (workloadId, signal) => deps.standingSignal.changed(workloadId, signal),

    async request(workloadId, msgType, content, options = {}) {
      const located = locate(workloadId);
      if (located.kind !== "Located") return notReady(located);
      const a = located.allocation;
      const outcome = await gateway.request(
        a.id,
        a.epoch,
        0,
        {
          kind: "jupyter",
          msgType,
          content: { ...content },
          ...(options.cell !== undefined && { cell: options.cell }),
          ...(options.maxOutputChars !== undefined && { maxOutputChars: options.maxOutputChars }),
          ...(options.buffers !== undefined &&
            options.buffers.length > 0 && { buffers: [...options.buffers] }),
        },
        NO_LIMIT_MS,
        options.onEvent ? { onEvent: options.onEvent } : {},
      );
      switch (outcome.kind) {
        case "Answered":
          return {
            kind: "Reply",
            msgType: outcome.response.msgType,
            content: outcome.response.content,
            kernelRestarted: outcome.response.kernelRestarted,
          };
        case "NotConnected":
        case "Disconnected":
          deps.onWorkerLost?.();
          return { kind: "NotReady", message: "the session's worker is not connected" };
        case "TimedOut":
          return { kind: "NotReady", message: "the kernel did not answer" };
        case "WorkerError":
          return { kind: "NotReady", message: `the worker could not run it: ${outcome.message}` };
        case "TooLarge":
          return { kind: "NotReady", message: `the request is too large (${outcome.bytes} bytes)` };
        default: {
          const never: never = outcome;
          throw new Error(`unhandled jupyter outcome ${JSON.stringify(never)}`);
        }
      }
    },

    async inputReply(workloadId, value) {
      const located = locate(workloadId);
      if (located.kind !== "Located") return false;
      const a = located.allocation;
      const outcome = await gateway.request(
        a.id,
        a.epoch,
        0,
        { kind: "input_reply", value },
        CONTROL_TIMEOUT_MS,
      );
      return outcome.kind === "Answered" && outcome.response.delivered;
    },

    async restart(workloadId) {
      const located = locate(workloadId);
      if (located.kind !== "Located") return notReady(located);
      const restarted = await restartKernel(gateway, located.allocation);
      if (restarted.kind === "WorkerGone") deps.onWorkerLost?.();
      if (restarted.kind !== "Answered") {
        const message =
          restarted.kind === "NoAnswer"
            ? restarted.message
            : "the session's worker is not connected";
        return { kind: "Failed", message: `the kernel was not restarted: ${message}` };
      }
      deps.log.info("kernel restarted", { workloadId, restarted: restarted.running });
      return restarted.running
        ? { kind: "Restarted" }
        : { kind: "Failed", message: restarted.message };
    },
  };
}
