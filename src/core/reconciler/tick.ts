/**
 * One level-triggered tick: read desired (the store) and observed (the backend, one call per
 * operation for everyone), then take at most one step per workload. A step is one of:
 * follow an observation; resolve an unrecorded submission by token; mint, prepare and
 * submit an attempt; run the cancel barrier; settle an ended attempt. Every step is written
 * as a compare-and-set on what it read, so a tick that dies half way leaves a store from
 * which the next tick simply takes the remaining steps.
 */
import { type Allocation, isActiveAllocation, isTerminal, type Workload } from "../models.ts";
import type { ObservedChange } from "../ports/allocation-backend.ts";
import type { ReconcileItem, Transition } from "../ports/reconciler-store.ts";
import { acknowledgeSweep } from "./acknowledge.ts";
import { cancelBarrier } from "./barrier.ts";
import { followObservation, isObservablePhase, recordFound, settleEnded } from "./decisions.ts";
import { gateMint } from "./dependency-gate.ts";
import { type TickEnv, write } from "./env.ts";
import {
  absorbChanges,
  focusedItems,
  fullTickDue,
  indexAllocations,
  settleFocus,
  type TickFocus,
} from "./focus.ts";
import { type BackendReads, readBackend, readBackendChanges } from "./reads.ts";
import { failConfirmed, sortRefused } from "./refused-while-learning.ts";
import { warnNearDeadline } from "./runway.ts";
import { type Live, submitAttempts } from "./submissions.ts";

interface Plan {
  /** Want to run, hold no active allocation, and may start an attempt. */
  readonly mint: Workload[];
  /** An attempt ended but the workload does not show it yet. */
  readonly settle: Transition[];
  /** Submission outcome never recorded: ask by token first (INV-8). */
  readonly unresolved: Live[];
  /** Refused while their profile's breaker learned (refused-while-learning.ts). */
  readonly refused: Live[];
  /**
   * Minted by this process and never handed to the backend (`env.fresh`): asking for the
   * token could only answer Absent, so these are submitted without a lookup.
   */
  readonly freshUnresolved: Live[];
  /** Have a handle: follow the observation. */
  readonly watched: Live[];
  /** Asked to stop: the cancel barrier. */
  readonly stopping: ReconcileItem[];
}

function classify(
  view: readonly ReconcileItem[],
  busy: (allocationId: string) => boolean,
  fresh: ReadonlySet<string>,
): Plan {
  const plan: Plan = {
    mint: [],
    settle: [],
    unresolved: [],
    refused: [],
    freshUnresolved: [],
    watched: [],
    stopping: [],
  };
  for (const item of view) {
    const { workload: w, current: a } = item;
    // A submission in flight: its lane records the answer. Asking for the token now could
    // hear Absent before the submission lands, and a resubmit then makes two jobs.
    if (a !== null && a.handle === null && busy(a.id) && w.desired.kind !== "STOP") continue;
    if (w.desired.kind === "STOP") {
      plan.stopping.push(item);
    } else if (a === null) {
      plan.mint.push(w);
    } else if (isActiveAllocation(a.phase)) {
      if (a.handle === null && fresh.has(a.id)) {
        plan.freshUnresolved.push({ workload: w, allocation: a });
      } else if (a.handle === null) plan.unresolved.push({ workload: w, allocation: a });
      else plan.watched.push({ workload: w, allocation: a });
    } else {
      const phase = a.phase;
      // An allocation in PENDING does not exist (attempts are born SUBMITTING).
      if (!isTerminal(phase)) continue;
      if (w.phase === "PENDING" && w.reason === "SUBMIT_REFUSED") {
        plan.refused.push({ workload: w, allocation: a });
        continue;
      }
      const settle = settleEnded(w, { ...a, phase });
      // Null: back in PENDING after a recoverable end (RETRYING), so the next attempt.
      if (settle === null) plan.mint.push(w);
      else plan.settle.push(settle);
    }
  }
  return plan;
}

/**
 * The store may decode `spec` lazily (only the workloads below are ever prepared); asking
 * for theirs here, before any backend call or write, keeps a corrupted spec a tick that
 * stops before its first step instead of one that fails half way.
 */
function decodePlanSpecs(env: TickEnv, plan: Plan): void {
  env.store.decodeSpecs([
    ...plan.mint,
    ...plan.unresolved.map((l) => l.workload),
    ...plan.freshUnresolved.map((l) => l.workload),
  ]);
}

/** What a tick (or a submission pass) looks at. */
interface Look {
  readonly looked: ReconcileItem[];
  /** `looked` holds every live workload. */
  readonly full: boolean;
  /**
   * Every live item by workload id while the tick keeps a focus (a store with a live view and
   * a backend that reports changes, focus.ts); null: no focus, every tick is full.
   */
  readonly items: ReadonlyMap<string, ReconcileItem> | null;
  /** Live workloads in the store. */
  readonly size: number;
}

/**
 * Reads the store's side: every live workload, or only the focus when the store and the
 * backend can both say what changed (focus.ts). A backend that cannot report what changed
 * gets every tick full, so keeping a focus for it would only cost (about 5 ms a tick at
 * 10,000 live workloads) and gain nothing. A pass (`forPass`) narrows the same way but
 * leaves the focus itself (what is due, what was settled) to the next tick.
 */
function lookAt(env: TickEnv, now: number, forPass: boolean): Look {
  const changes = env.store.loadViewChanges?.();
  if (changes === undefined || !env.backend.reportsChanges) {
    const all = changes === undefined ? [...env.store.loadView()] : [...changes.items.values()];
    return { looked: all, full: true, items: null, size: all.length };
  }
  const { focus } = env;
  absorbChanges(focus, changes);
  const full = forPass ? changes.rebuilt : fullTickDue(focus, true, now);
  const looked = full ? [...changes.items.values()] : focusedItems(focus, changes.items);
  return { looked, full, items: changes.items, size: changes.items.size };
}

export async function reconcileTick(env: TickEnv): Promise<number> {
  const now = env.clock.now();
  const look = lookAt(env, now, false);
  const { looked, full, items } = look;
  if (full) keepFresh(env, looked);
  if (items !== null && !full) lookAtDueWarnings(env, items, looked, now);
  env.runway.note(looked, env.warningLeadMs, full);
  if (items !== null) indexAllocations(env.focus, looked, full);
  const plan = classify(looked, env.lanes.busy, env.fresh);
  decodePlanSpecs(env, plan);
  const refused = sortRefused(env, plan.refused, now);
  plan.mint.push(...refused.release);
  const targets = readTargets(env, plan, refused.confirm);
  if (items === null) {
    const reads = await readBackend(env, targets.observed, targets.unresolved);
    await takeSteps(env, plan, reads, refused.confirm);
    return look.size;
  }
  const { focus } = env;
  if (full) focus.lastFullAt = now;
  // A full tick starts the feed afresh: it observes every target at the cursor's moment.
  const cursor = full ? null : focus.cursor;
  // Until this tick's steps are written, a tick that dies half way must not leave a cursor
  // past changes it never acted on: the next one then looks at everything.
  focus.cursor = null;
  const read = await readBackendChanges(env, cursor, targets.observed, targets.unresolved);
  const reads = followChanges(env, items, plan, looked, read);
  await takeSteps(env, plan, reads, refused.confirm);
  // Null when there is none to go on from (an outage, an expired cursor): the next tick
  // looks at everything.
  focus.cursor = read.cursor;
  settleFocus(focus, looked, settledThisTick(plan, reads), full);
  return look.size;
}

/**
 * The backend's changes for workloads this tick did not look at: each steadily watched one
 * becomes watched (and looked at) with the change as its observation.
 */
function followChanges(
  env: TickEnv,
  items: ReadonlyMap<string, ReconcileItem>,
  plan: Plan,
  looked: ReconcileItem[],
  read: Awaited<ReturnType<typeof readBackendChanges>>,
): BackendReads {
  const observations = new Map(read.reads.observations ?? []);
  for (const change of read.changes) {
    const live = changedLive(env, env.focus, items, change);
    if (live === null || observations.has(live.allocation.id)) continue;
    plan.watched.push(live);
    looked.push({ workload: live.workload, current: live.allocation });
    observations.set(live.allocation.id, change.observation);
  }
  return read.reads.observations === null ? read.reads : { ...read.reads, observations };
}

/**
 * A steadily watched workload is skipped while nothing changes, but its warning comes due by
 * the clock alone: look at it (observe it) in the tick where it is due.
 */
function lookAtDueWarnings(
  env: TickEnv,
  items: ReadonlyMap<string, ReconcileItem>,
  looked: ReconcileItem[],
  now: number,
): void {
  // A workload leaves the live view only by a write, so the ones gone since the last tick
  // are among the dirty (a rebuilt view makes the tick full, which notes every live one).
  const gone: string[] = [];
  for (const id of env.focus.dirty) if (!items.has(id)) gone.push(id);
  env.runway.forget(gone);
  const due = env.runway.dueNow(now);
  if (due.length === 0) return;
  const seen = new Set(looked.map((item) => item.workload.id));
  for (const id of due) {
    const item = items.get(id);
    if (item !== undefined && !seen.has(id)) looked.push(item);
  }
}

/**
 * Forgets fresh marks of attempts that are no longer waiting for their first submit (refused,
 * stopped, gone): a tick that sees every live workload is the one that can tell.
 */
function keepFresh(env: TickEnv, items: readonly ReconcileItem[]): void {
  if (env.fresh.size === 0) return;
  const waiting = new Set<string>();
  for (const { current: a } of items) {
    if (a !== null && a.handle === null && a.phase === "SUBMITTING") waiting.add(a.id);
  }
  for (const id of env.fresh) if (!waiting.has(id)) env.fresh.delete(id);
}

/** What a tick asks the backend about: handles to observe, tokens to look up. */
function readTargets(
  env: TickEnv,
  plan: Plan,
  confirm: readonly Live[],
): { readonly observed: Allocation[]; readonly unresolved: Allocation[] } {
  const observed: Allocation[] = plan.watched.map((l) => l.allocation);
  const unresolved: Allocation[] = [...plan.unresolved, ...confirm].map((l) => l.allocation);
  for (const { current: a } of plan.stopping) {
    if (a === null || !isActiveAllocation(a.phase)) continue;
    // In flight: no token lookup, so the barrier waits for the lane's answer (NoAnswer).
    if (a.handle === null && !env.lanes.busy(a.id)) unresolved.push(a);
    else if (a.handle === null) continue;
    else observed.push(a);
  }
  return { observed, unresolved };
}

async function takeSteps(
  env: TickEnv,
  plan: Plan,
  reads: BackendReads,
  confirm: readonly Live[],
): Promise<void> {
  const resubmit = followAndResolve(env, plan, reads);
  failConfirmed(env, confirm, reads);
  submitAttempts(env, gateMint(env, plan.mint), plan.freshUnresolved, resubmit);
  await cancelBarrier(env, plan.stopping, reads);
  await acknowledgeSweep(env);
}

/**
 * A change the backend reported for a workload this tick did not look at: the workload to
 * follow, if it is one steadily watched on exactly that allocation and handle (a change of
 * an older attempt, or of a handle the store does not hold, is not this workload's news).
 */
function changedLive(
  env: TickEnv,
  focus: TickFocus,
  items: ReadonlyMap<string, ReconcileItem>,
  change: ObservedChange,
): Live | null {
  const workloadId = focus.byAllocation.get(change.target.allocationId);
  if (workloadId === undefined) return null;
  if (focus.attention.has(workloadId) || focus.dirty.has(workloadId)) return null;
  const item = items.get(workloadId);
  const a = item?.current ?? null;
  if (item === undefined || a === null || a.id !== change.target.allocationId) return null;
  if (a.handle !== change.target.handle || item.workload.desired.kind === "STOP") return null;
  if (!isActiveAllocation(a.phase) || env.lanes.busy(a.id)) return null;
  return { workload: item.workload, allocation: a };
}

/** Watched workloads with a definite observation this tick: nothing to look at next tick. */
function settledThisTick(plan: Plan, reads: BackendReads): Set<string> {
  const settled = new Set<string>();
  if (reads.observations === null) return settled;
  for (const { workload, allocation } of plan.watched) {
    const obs = reads.observations.get(allocation.id);
    if (obs?.kind === "Observed" && isObservablePhase(obs.phase)) settled.add(workload.id);
  }
  return settled;
}

/**
 * The submission pass: only the steps that need no backend read, i.e. minting and submitting
 * attempts for workloads that want to run and hold nothing. `run` takes it on a wake that
 * comes before the next tick is due, so a wake is not held back by the polling ceiling: the
 * new attempt's token is fresh, so its submit needs no lookup either, and the pass makes no
 * listing call at all. Everything else waits for the next tick. With a focus, it looks only
 * at the workloads the next tick would (new ones are written, so they are among them).
 */
export async function reconcileSubmissions(env: TickEnv): Promise<number> {
  const look = lookAt(env, env.clock.now(), true);
  const plan = classify(look.looked, env.lanes.busy, env.fresh);
  decodePlanSpecs(env, plan);
  submitAttempts(env, gateMint(env, plan.mint), plan.freshUnresolved);
  return look.size;
}

/** Observations and token lookups for workloads that want to run; returns the Absent ones. */
function followAndResolve(env: TickEnv, plan: Plan, reads: BackendReads): Live[] {
  const now = env.clock.now();
  const transitions: Transition[] = [...plan.settle];
  if (reads.observations !== null) {
    for (const { workload, allocation } of plan.watched) {
      const obs = reads.observations.get(allocation.id);
      if (obs === undefined) {
        env.log.warn("backend gave no observation for an allocation; left as it is", {
          allocationId: allocation.id,
        });
        continue;
      }
      // Indeterminate (e.g. accounting lagging): never a reason to call it LOST.
      if (obs.kind === "Indeterminate") continue;
      if (!isObservablePhase(obs.phase)) {
        env.log.warn("backend reported a phase it cannot observe; ignored", {
          allocationId: allocation.id,
          phase: obs.phase,
        });
        continue;
      }
      const t = followObservation(workload, allocation, obs, now);
      if (t !== null) transitions.push(t);
      // A steady running allocation near its stored end time: the warning, once.
      else if (allocation.deadlineAt !== null && allocation.deadlineWarnedAt === null) {
        const warn = warnNearDeadline(allocation, env.warningLeadMs(workload.profile), now);
        if (warn !== null) transitions.push(warn);
      }
    }
  }
  const resubmit: Live[] = [];
  for (const live of plan.unresolved) {
    const found = reads.found.get(live.allocation.token);
    if (found === undefined) continue;
    switch (found.kind) {
      case "Found": {
        const t = recordFound(live.workload, live.allocation, found, now);
        if (t !== null) transitions.push(t);
        break;
      }
      case "Absent":
        // A definite answer that it never landed: submit again, with the SAME token and
        // allocation, so a late landing of the first try is still the same job.
        resubmit.push(live);
        break;
      case "Unavailable":
        // No answer is not an answer of absence: ask again next tick.
        break;
      default: {
        const unreachable: never = found;
        throw new Error(`unhandled find result ${JSON.stringify(unreachable)}`);
      }
    }
  }
  write(env, transitions);
  return resubmit;
}
