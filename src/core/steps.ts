/**
 * Where a step (a command run inside a workload's allocation) may run: only in the CURRENT
 * attempt's allocation, and only while it runs with a handle. Never a new submission in its
 * place (INV-4): a step asked of a workload with nothing running is refused, not queued.
 *
 * A rule, not a handler: it returns a union and the API maps each refusal to its problem.
 */
import { type Allocation, isTerminal, type Workload } from "./models.ts";
import type {
  AllocationBackend,
  ObservationTarget,
  TaskRunner,
} from "./ports/allocation-backend.ts";

export type StepPlacement =
  | {
      readonly kind: "Placed";
      readonly runner: TaskRunner;
      readonly target: ObservationTarget;
    }
  | {
      readonly kind: "Refused";
      /**
       * STEPS_UNSUPPORTED: the backend cannot run a command inside an allocation.
       * WORKLOAD_ENDING: the workload ended or is being stopped.
       * NO_LIVE_ALLOCATION: its current attempt is not running (yet, or any more).
       */
      readonly reason: "STEPS_UNSUPPORTED" | "WORKLOAD_ENDING" | "NO_LIVE_ALLOCATION";
      readonly message: string;
    };

export function placeStep(
  backend: AllocationBackend,
  workload: Workload,
  allocations: readonly Allocation[],
): StepPlacement {
  const runner = backend.capabilities.tasks;
  if (runner === null) {
    return {
      kind: "Refused",
      reason: "STEPS_UNSUPPORTED",
      message: `backend ${backend.name} cannot run steps inside an allocation`,
    };
  }
  const stopping = workload.desired.kind === "STOP";
  if (isTerminal(workload.phase) || stopping) {
    return {
      kind: "Refused",
      reason: "WORKLOAD_ENDING",
      message: `workload ${workload.id} is ${workload.phase}${stopping ? " and being stopped" : ""}`,
    };
  }
  const current = allocations.find((a) => a.epoch === workload.executionEpoch);
  if (current?.phase !== "RUNNING" || current.handle === null) {
    return {
      kind: "Refused",
      reason: "NO_LIVE_ALLOCATION",
      message: `workload ${workload.id} has no running allocation to run a step in`,
    };
  }
  return {
    kind: "Placed",
    runner,
    target: { allocationId: current.id, token: current.token, handle: current.handle },
  };
}
