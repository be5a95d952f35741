/**
 * The one rule for restarting a session's kernel (a fresh interpreter in the same
 * allocation, every variable gone), which both the native API (service.ts) and the Jupyter
 * gateway (jupyter-service.ts) translate: one request, one timeout, one reading of the
 * worker's answer. Two copies had drifted apart (30 s against 60 s).
 */
import type { Allocation } from "../models.ts";
import type { WorkerGateway } from "../ports/worker-gateway.ts";

/** A restart kills an interpreter and starts one (Python's start-up, on a loaded node). */
export const RESTART_TIMEOUT_MS = 60_000;

export type KernelRestart =
  /** The worker answered: `running` is false when the fresh interpreter could not start. */
  | { readonly kind: "Answered"; readonly running: boolean; readonly message: string }
  /** No live connection to the worker (the caller has readiness look again). */
  | { readonly kind: "WorkerGone" }
  /** The worker did not restart it; `message` says how. */
  | { readonly kind: "NoAnswer"; readonly message: string };

/** Asks rank 0 of `allocation` for a fresh kernel. Never rejects. */
export async function restartKernel(
  gateway: Pick<WorkerGateway, "request">,
  allocation: Allocation,
): Promise<KernelRestart> {
  const outcome = await gateway.request(
    allocation.id,
    allocation.epoch,
    0,
    { kind: "restart" },
    RESTART_TIMEOUT_MS,
  );
  switch (outcome.kind) {
    case "Answered":
      return {
        kind: "Answered",
        running: outcome.response.restarted,
        message: outcome.response.message,
      };
    case "NotConnected":
    case "Disconnected":
      return { kind: "WorkerGone" };
    case "TimedOut":
      return { kind: "NoAnswer", message: "the worker did not answer the restart in time" };
    case "WorkerError":
      return { kind: "NoAnswer", message: `the worker could not restart: ${outcome.message}` };
    case "TooLarge":
      throw new Error("a restart request cannot be too large");
    default: {
      const never: never = outcome;
      throw new Error(`unhandled restart outcome ${JSON.stringify(never)}`);
    }
  }
}
