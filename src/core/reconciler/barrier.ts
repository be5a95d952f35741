/**
 * The cancel barrier: the only place resources are returned. One method, so the order the
 * plan fixes is a readable sequence rather than something that emerges from where calls
 * happen to be:
 *
 *   1 fence → 2 cancel tasks → 3 drain → 4 release → 5 observe terminal → 6 mark terminal
 *
 * Each stage runs for every stopping workload of the tick before the next stage starts, so a
 * stage's store writes are one batch and its backend work is one call. It is re-entrant:
 * every stage is either idempotent (hooks, cancel) or a compare-and-set write that is a
 * no-op once done (fence, mark), and progress lives only in the store. A tick that dies
 * anywhere inside, or a backend that takes ten ticks to act on a cancel, just means the next
 * tick runs it again and gets further. A barrier that could not run twice would wedge the
 * workload the first time the backend lagged.
 *
 * Stage 5 reads the tick's single observation (taken at the start of the tick, before this
 * run's release): an allocation seen ended is ended, whatever ended it. One released in this
 * run is seen ended by a later tick's observation, after the release.
 */
import {
  type Allocation,
  type ExternalHandle,
  isActiveAllocation,
  isTerminal,
  type TerminalPhase,
  type Workload,
} from "../models.ts";
import type { AllocationObservation, ObservationTarget } from "../ports/allocation-backend.ts";
import type { ReconcileItem } from "../ports/reconciler-store.ts";
import { type TickEnv, write } from "./env.ts";
import type { BackendReads } from "./reads.ts";
import {
  fence,
  markStopped,
  recordStoppingHandle,
  type StopEnding,
  type StopIntent,
  stopWithoutAllocation,
} from "./stop-decisions.ts";

interface Stopping {
  readonly workload: Workload;
  readonly allocation: Allocation;
  readonly stop: StopIntent;
}

type Observed = Extract<AllocationObservation, { readonly kind: "Observed" }>;

/** Where the backend stands on a stopping allocation, from this tick's reads. */
type BackendStand =
  /** No answer (unavailable, indeterminate token lookup): a job may exist, so wait. */
  | { readonly kind: "NoAnswer" }
  | { readonly kind: "NeverSubmitted" }
  | {
      readonly kind: "Held";
      readonly handle: ExternalHandle;
      /** Set when the handle was only now found by token and must be recorded. */
      readonly newlyFound: boolean;
      readonly observation: AllocationObservation | undefined;
    };

function stopIntentOf(w: Workload): StopIntent {
  if (w.desired.kind === "STOP") return { reason: w.desired.reason, message: w.desired.message };
  throw new Error(`workload ${w.id} is not asked to stop`);
}

function standOf(a: Allocation, reads: BackendReads): BackendStand {
  if (a.handle !== null) {
    return {
      kind: "Held",
      handle: a.handle,
      newlyFound: false,
      observation: reads.observations?.get(a.id),
    };
  }
  // Submission unresolved (its answer was Unknown, or the tick died around submit): a job
  // may exist, so only a definite Absent lets the barrier skip the backend.
  const found = reads.found.get(a.token);
  if (found === undefined) return { kind: "NoAnswer" };
  switch (found.kind) {
    case "Unavailable":
      return { kind: "NoAnswer" };
    case "Absent":
      return { kind: "NeverSubmitted" };
    case "Found":
      return {
        kind: "Held",
        handle: found.handle,
        newlyFound: true,
        observation: found.observation,
      };
    default: {
      const unreachable: never = found;
      throw new Error(`unhandled find result ${JSON.stringify(unreachable)}`);
    }
  }
}

function observedEnded(
  observation: AllocationObservation | undefined,
): (Observed & { readonly phase: TerminalPhase }) | null {
  if (observation?.kind !== "Observed") return null;
  const phase = observation.phase;
  return isTerminal(phase) ? { ...observation, phase } : null;
}

export async function cancelBarrier(
  env: TickEnv,
  items: readonly ReconcileItem[],
  reads: BackendReads,
): Promise<void> {
  if (items.length === 0) return;
  const now = env.clock.now();

  // Nothing at the backend (stopped before any attempt was minted, or between attempts):
  // nothing to fence or release, so the barrier is just its last stage.
  const direct = items.filter((i) => i.current === null || !isActiveAllocation(i.current.phase));
  write(
    env,
    direct.map((i) => stopWithoutAllocation(i.workload, stopIntentOf(i.workload))),
  );
  let stopping: Stopping[] = [];
  for (const i of items) {
    if (i.current !== null && isActiveAllocation(i.current.phase)) {
      stopping.push({
        workload: i.workload,
        allocation: i.current,
        stop: stopIntentOf(i.workload),
      });
    }
  }
  if (stopping.length === 0) return;

  // 1. Fence: workload and allocation STOPPING, so nothing admits new work for this epoch.
  stopping = fenceAll(env, stopping);
  env.faultPoint("reconciler.after-fence");

  // 2. Cancel tasks.
  stopping = await keepWhere(stopping, async (s) => {
    try {
      await env.hooks.cancelTasks(s.workload, s.allocation);
      return true;
    } catch (error) {
      env.log.warn("cancelling tasks failed; barrier waits", {
        workloadId: s.workload.id,
        error: String(error),
      });
      return false;
    }
  });

  // 3. Drain.
  stopping = await keepWhere(stopping, async (s) => {
    try {
      return await env.hooks.drained(s.workload, s.allocation);
    } catch (error) {
      env.log.warn("drain check failed; barrier waits", {
        workloadId: s.workload.id,
        error: String(error),
      });
      return false;
    }
  });

  // 4. Release, in one backend call. An allocation already seen ended needs no release.
  const stands = stopping.map((s) => ({ s, stand: standOf(s.allocation, reads) }));
  const releases: ObservationTarget[] = [];
  const handles = [];
  for (const { s, stand } of stands) {
    if (stand.kind !== "Held" || observedEnded(stand.observation) !== null) continue;
    if (stand.newlyFound) handles.push(recordStoppingHandle(s.allocation, stand.handle, now));
    releases.push({
      allocationId: s.allocation.id,
      token: s.allocation.token,
      handle: stand.handle,
    });
  }
  write(env, handles);
  releaseInLane(env, releases);

  // 5. Observe terminal: the backend says it ended, or definitely never had it.
  const ended: { readonly s: Stopping; readonly ending: StopEnding }[] = [];
  for (const { s, stand } of stands) {
    if (stand.kind === "NeverSubmitted") {
      ended.push({ s, ending: { kind: "NeverSubmitted" } });
    } else if (stand.kind === "Held") {
      const observation = observedEnded(stand.observation);
      if (observation === null) continue;
      ended.push({
        s,
        ending: stand.newlyFound
          ? { kind: "Ended", observation, handle: stand.handle }
          : { kind: "Ended", observation },
      });
    }
  }

  // 6. Mark terminal.
  write(
    env,
    ended.map(({ s, ending }) => markStopped(s.workload, s.allocation, s.stop, ending, now)),
  );
}

/**
 * Stage 4's backend call runs in a lane: a slow cancel must not hold the tick (and with it
 * every other workload's observation). Allocations with a cancel already in flight are not
 * sent again; stage 5 reads only the tick's observation, never the cancel's answer, so
 * nothing after this point waits for it. An unanswered release is sent again next tick.
 */
function releaseInLane(env: TickEnv, releases: readonly ObservationTarget[]): void {
  const targets = releases.filter((t) => !env.lanes.busy(t.allocationId));
  if (targets.length === 0) return;
  if (!env.lanes.hasRoom("cancel")) {
    env.log.info("every lane is in flight; release waits for the next tick", {
      waiting: targets.length,
    });
    return;
  }
  const lane = env.lanes.start(
    "cancel",
    targets.map((t) => t.allocationId),
    async () => {
      const released = await env.backend.cancel(targets);
      for (const [allocationId, answer] of released) {
        if (answer.kind === "Unavailable") {
          env.log.warn("release not acknowledged; next tick sends it again", {
            allocationId,
            message: answer.message,
          });
        }
      }
      env.faultPoint("reconciler.after-release");
    },
  );
  env.started.push(lane);
}

function fenceAll(env: TickEnv, stopping: readonly Stopping[]): Stopping[] {
  const fences = stopping.map((s) => fence(s.workload, s.allocation, s.stop));
  const pending = fences.flatMap((t, i) => (t === null ? [] : [{ t, i }]));
  const applied = write(
    env,
    pending.map((p) => p.t),
  );
  const failed = new Set(pending.filter((_, k) => applied[k] !== true).map((p) => p.i));
  const out: Stopping[] = [];
  stopping.forEach((s, i) => {
    // The world moved under us (another writer, or the workload changed since the read):
    // leave it to the next tick, which reads it afresh.
    if (failed.has(i)) return;
    const t = fences[i];
    if (t === null || t === undefined) {
      out.push(s);
      return;
    }
    out.push({
      ...s,
      workload: {
        ...s.workload,
        phase: "STOPPING",
        reason: s.stop.reason,
        message: t.workload?.message ?? null,
      },
      allocation: {
        ...s.allocation,
        phase: "STOPPING",
        reason: s.stop.reason,
        message: t.allocation?.message ?? null,
      },
    });
  });
  return out;
}

async function keepWhere<T>(
  items: readonly T[],
  keep: (item: T) => Promise<boolean>,
): Promise<T[]> {
  const verdicts = await Promise.all(items.map(keep));
  return items.filter((_, i) => verdicts[i] === true);
}
