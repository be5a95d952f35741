/**
 * Attempts admitted with their workload (`Reconciler.admitted`), gathered until the event
 * loop's next turn and then handed to the backend in one lane. Why: the answers of a group
 * commit are then all sent before any of their submissions starts (a backend's submission
 * work ahead of them held every 201 of a burst back, issue 34), and a burst is one backend
 * call rather than one lane each with the rest waiting for a free one.
 */
import { nextTurn } from "../../lib/clock.ts";
import type { Allocation, Workload } from "../models.ts";
import type { ReconcilerStore } from "../ports/reconciler-store.ts";
import type { Live } from "./submissions.ts";

export interface AdmittedQueue {
  /**
   * A workload was admitted with its first attempt (its token fresh: no lookup before its
   * submission), or without one (the loop is woken to mint it). When the submission step
   * leaves an attempt waiting (no free lane, a backend not answering, a degraded profile),
   * the loop's next pass or tick takes it, still lookup-free while this process lives.
   */
  admitted(workload: Workload, attempt: Allocation | null): void;
  /** Attempts waiting for their turn (each counts as a command in flight). */
  readonly waiting: number;
  /** Resolves once none waits (each has been handed to the submission step). */
  drained(): Promise<void>;
  /** From now on nothing is handed over: the store is about to close. */
  close(): void;
}

export interface AdmittedQueueDeps {
  readonly store: Pick<ReconcilerStore, "findAllocationsByTokens">;
  /** The reconciler's attempts minted by this process and not yet handed over. */
  readonly fresh: Set<string>;
  /** The submission step for these attempts; how many it left waiting. */
  readonly submit: (group: readonly Live[]) => number;
  readonly wake: () => void;
}

export function createAdmittedQueue(deps: AdmittedQueueDeps): AdmittedQueue {
  let waiting: Live[] = [];
  let closed = false;

  /**
   * The attempts as the store has them now, those still wanted: a stop that came in the
   * turn they waited is the tick's to settle, with nothing sent to the backend. One read by
   * token for the group.
   */
  function stillWanted(group: readonly Live[]): Live[] {
    if (group.length === 0) return [];
    const now = deps.store.findAllocationsByTokens(group.map((l) => l.allocation.token));
    const byId = new Map(now.map((found) => [found.allocation.id, found]));
    const wanted: Live[] = [];
    for (const live of group) {
      const found = byId.get(live.allocation.id);
      if (found === undefined || found.workload.desired.kind !== "RUN") continue;
      if (found.allocation.phase !== "SUBMITTING" || found.allocation.handle !== null) continue;
      wanted.push(found);
    }
    return wanted;
  }

  function submitWaiting(): void {
    if (closed) return;
    const group = waiting;
    waiting = [];
    const wanted = stillWanted(group);
    const left = deps.submit(wanted);
    // Not woken when they went out: a pass started now would only find them busy. The
    // lane asks for the next look when it settles.
    if (left > 0 || wanted.length < group.length) deps.wake();
  }

  return {
    admitted(workload, attempt) {
      if (closed) return;
      if (attempt === null) {
        deps.wake();
        return;
      }
      deps.fresh.add(attempt.id);
      if (waiting.length === 0) void nextTurn().then(submitWaiting);
      waiting.push({ workload, allocation: attempt });
    },
    get waiting() {
      return waiting.length;
    },
    async drained() {
      while (waiting.length > 0) await nextTurn();
    },
    close() {
      // Those waiting stay SUBMITTING in the store; `drained` no longer waits for them.
      closed = true;
      waiting = [];
    },
  };
}
