/**
 * One level-triggered tick: read desired (the store) and observed (the backend, one call per
 * operation for everyone), then take at most one step per workload. A step is one of:
 * follow an observation; resolve an unrecorded submission by token; mint, prepare and
 * submit an attempt; run the cancel barrier; settle an ended attempt. Every step is written
 * as a compare-and-set on what it read, so a tick that dies half way leaves a store from
 * which the next tick simply takes the remaining steps.
 */
import type { PrepareResult } from "../attempt-preparer.ts";
import { type Allocation, isActiveAllocation, isTerminal, type Workload } from "../models.ts";
import type { LiveViewChanges, ReconcileItem, Transition } from "../ports/reconciler-store.ts";
import type { ObservationCursor, ObservedChange, SubmitRequest } from "../ports.ts";
import { acknowledgeSweep } from "./acknowledge.ts";
import { cancelBarrier } from "./barrier.ts";
import {
  followObservation,
  isObservablePhase,
  recordFound,
  recordSubmitResult,
  refuseAttempt,
  settleEnded,
} from "./decisions.ts";
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
import { warnNearDeadline } from "./runway.ts";

interface Live {
  readonly workload: Workload;
  readonly allocation: Allocation;
}

interface Plan {
  /** Want to run, hold no active allocation, and may start an attempt. */
  readonly mint: Workload[];
  /** An attempt ended but the workload does not show it yet. */
  readonly settle: Transition[];
  /** Submission outcome never recorded: ask by token first (INV-8). */
  readonly unresolved: Live[];
  /** Have a handle: follow the observation. */
  readonly watched: Live[];
  /** Asked to stop: the cancel barrier. */
  readonly stopping: ReconcileItem[];
}

function classify(view: readonly ReconcileItem[], busy: (allocationId: string) => boolean): Plan {
  const plan: Plan = { mint: [], settle: [], unresolved: [], watched: [], stopping: [] };
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
      if (a.handle === null) plan.unresolved.push({ workload: w, allocation: a });
      else plan.watched.push({ workload: w, allocation: a });
    } else {
      const phase = a.phase;
      // An allocation in PENDING does not exist (attempts are born SUBMITTING).
      if (!isTerminal(phase)) continue;
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
  env.store.decodeSpecs([...plan.mint, ...plan.unresolved.map((l) => l.workload)]);
}

/**
 * The view for a tick that looks at everything, or null when this tick may narrow its look
 * (`focus.ts`). A backend that cannot report what changed gets every tick full, so keeping a
 * focus for it would only cost (about 5 ms a tick at 10,000 live workloads) and gain nothing.
 */
function fullView(
  env: TickEnv,
  changes: LiveViewChanges | undefined,
): readonly ReconcileItem[] | null {
  if (changes === undefined) return env.store.loadView();
  return env.backend.reportsChanges ? null : [...changes.items.values()];
}

export async function reconcileTick(env: TickEnv): Promise<number> {
  const changes = env.store.loadViewChanges?.();
  const view = fullView(env, changes);
  if (view !== null || changes === undefined) {
    const items = view ?? [];
    env.runway.note(items, env.warningLeadMs, true);
    const plan = classify(items, env.lanes.busy);
    decodePlanSpecs(env, plan);
    const targets = readTargets(env, plan);
    const reads = await readBackend(env, targets.observed, targets.unresolved);
    await takeSteps(env, plan, reads);
    return items.length;
  }
  const { focus } = env;
  absorbChanges(focus, changes);
  const now = env.clock.now();
  const full = fullTickDue(focus, env.backend.reportsChanges, now);
  const looked = full ? [...changes.items.values()] : focusedItems(focus, changes.items);
  if (!full) lookAtDueWarnings(env, changes.items, looked, now);
  env.runway.note(looked, env.warningLeadMs, full);
  indexAllocations(focus, looked, full);
  const plan = classify(looked, env.lanes.busy);
  decodePlanSpecs(env, plan);
  const targets = readTargets(env, plan);
  let reads: BackendReads;
  // Null when there is none to go on from (an outage, an expired cursor): the next tick
  // looks at everything.
  let nextCursor: ObservationCursor | null = null;
  if (env.backend.reportsChanges) {
    if (full) focus.lastFullAt = now;
    // A full tick starts the feed afresh: it observes every target at the cursor's moment.
    const cursor = full ? null : focus.cursor;
    // Until this tick's steps are written, a tick that dies half way must not leave a cursor
    // past changes it never acted on: the next one then looks at everything.
    focus.cursor = null;
    const read = await readBackendChanges(env, cursor, targets.observed, targets.unresolved);
    nextCursor = read.cursor;
    reads = read.reads;
    const observations = new Map(reads.observations ?? []);
    for (const change of read.changes) {
      const live = changedLive(env, focus, changes.items, change);
      if (live === null || observations.has(live.allocation.id)) continue;
      plan.watched.push(live);
      looked.push({ workload: live.workload, current: live.allocation });
      observations.set(live.allocation.id, change.observation);
    }
    if (reads.observations !== null) reads = { ...reads, observations };
  } else {
    reads = await readBackend(env, targets.observed, targets.unresolved);
  }
  await takeSteps(env, plan, reads);
  focus.cursor = nextCursor;
  settleFocus(focus, looked, settledThisTick(plan, reads), full);
  return changes.items.size;
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
  env.runway.retain((id) => items.has(id));
  const seen = new Set(looked.map((item) => item.workload.id));
  for (const id of env.runway.dueNow(now)) {
    const item = items.get(id);
    if (item !== undefined && !seen.has(id)) looked.push(item);
  }
}

/** What a tick asks the backend about: handles to observe, tokens to look up. */
function readTargets(
  env: TickEnv,
  plan: Plan,
): { readonly observed: Allocation[]; readonly unresolved: Allocation[] } {
  const observed: Allocation[] = plan.watched.map((l) => l.allocation);
  const unresolved: Allocation[] = plan.unresolved.map((l) => l.allocation);
  for (const { current: a } of plan.stopping) {
    if (a === null || !isActiveAllocation(a.phase)) continue;
    // In flight: no token lookup, so the barrier waits for the lane's answer (NoAnswer).
    if (a.handle === null && !env.lanes.busy(a.id)) unresolved.push(a);
    else if (a.handle === null) continue;
    else observed.push(a);
  }
  return { observed, unresolved };
}

async function takeSteps(env: TickEnv, plan: Plan, reads: BackendReads): Promise<void> {
  const resubmit = followAndResolve(env, plan, reads);
  await submitAttempts(env, plan.mint, resubmit);
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
 * comes before the next observation is due, so a POST is not held back by the polling
 * ceiling: the new attempt's token is fresh, so its submit needs no lookup either, and the
 * pass makes no listing call at all. Everything else waits for the next full tick. With a
 * focus, it looks only at the workloads the next tick would (new ones are written, so they
 * are among them) and leaves the focus for that tick.
 */
export async function reconcileSubmissions(env: TickEnv): Promise<number> {
  const changes = env.store.loadViewChanges?.();
  const view = fullView(env, changes);
  if (view !== null || changes === undefined) {
    const items = view ?? [];
    const plan = classify(items, env.lanes.busy);
    decodePlanSpecs(env, plan);
    await submitAttempts(env, plan.mint, []);
    return items.length;
  }
  absorbChanges(env.focus, changes);
  const looked = changes.rebuilt
    ? [...changes.items.values()]
    : focusedItems(env.focus, changes.items);
  const plan = classify(looked, env.lanes.busy);
  decodePlanSpecs(env, plan);
  await submitAttempts(env, plan.mint, []);
  return changes.items.size;
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

/**
 * Mint (persist token and attempt) → prepare → one submit → record the answers. The mint is
 * committed before the backend is asked anything: a crash after the backend accepted must
 * leave a token in the store to find the job by (INV-8).
 */
async function submitAttempts(
  env: TickEnv,
  mint: readonly Workload[],
  resubmit: readonly Live[],
): Promise<void> {
  const attempts: Live[] = [];
  // Minted in this call, by this process, and not yet handed to any backend call: the only
  // tokens whose lookup before submit is provably useless. A resubmit after Absent, and
  // anything a previous process minted, is not in here and is looked up first.
  const fresh = new Set<string>();
  if ((mint.length > 0 || resubmit.length > 0) && !env.lanes.hasRoom("submit")) {
    // Every submit lane is taken (hung submissions): nothing is minted, so these wait as
    // they are, PENDING or resolved-Absent, for a tick with a free lane.
    env.log.debug("every submit lane is in flight; new attempts wait", {
      waiting: mint.length + resubmit.length,
    });
    return;
  }
  if (mint.length > 0 && env.backend.unavailable) {
    // Submitting into a backend that just failed to answer only piles up Unknowns to
    // resolve; the workloads stay PENDING until a tick hears from it.
    env.log.info("backend unavailable this tick; new attempts wait", { waiting: mint.length });
  } else if (mint.length > 0) {
    const inputs = mint.map((w) => ({
      workloadId: w.id,
      allocationId: env.newAllocationId(),
      token: env.mintToken(),
      expectedEpoch: w.executionEpoch,
      message: `attempt ${w.executionEpoch + 1} of ${Math.max(w.maxAttempts, w.executionEpoch + 1)}`,
    }));
    const results = env.store.mintAttempts(inputs);
    results.forEach((r, i) => {
      const w = mint[i];
      const input = inputs[i];
      if (w === undefined || input === undefined) return;
      switch (r.kind) {
        case "Minted":
          env.counters.minted += 1;
          env.counters.writes += 1;
          attempts.push({
            workload: {
              ...w,
              executionEpoch: r.allocation.epoch,
              phase: "SUBMITTING",
              reason: null,
              message: input.message,
            },
            allocation: r.allocation,
          });
          fresh.add(r.allocation.id);
          break;
        case "Stale":
          env.log.debug("attempt not minted; the workload moved on", {
            workloadId: w.id,
            message: r.message,
          });
          break;
        default: {
          const unreachable: never = r;
          throw new Error(`unhandled mint result ${JSON.stringify(unreachable)}`);
        }
      }
    });
    env.faultPoint("reconciler.after-mint");
  }
  attempts.push(...resubmit);
  if (attempts.length === 0) return;

  const now = env.clock.now();
  const prepared = await Promise.all(
    attempts.map(async (live): Promise<PrepareResult | null> => {
      try {
        return await env.preparer.prepare(live.workload, live.allocation);
      } catch (error) {
        // Broken infrastructure (a directory that cannot be created): the attempt stays
        // SUBMITTING with no handle, so the next tick asks by token (Absent) and prepares again.
        env.log.error("preparing an attempt failed; retried next tick", {
          workloadId: live.workload.id,
          allocationId: live.allocation.id,
          error: String(error),
        });
        return null;
      }
    }),
  );
  const refusals: Transition[] = [];
  const requests: { readonly live: Live; readonly request: SubmitRequest }[] = [];
  attempts.forEach((live, i) => {
    const p = prepared[i];
    if (p === null || p === undefined) return;
    switch (p.kind) {
      case "Refused":
        refusals.push(refuseAttempt(live.workload, live.allocation, p.reason, p.message, now));
        break;
      case "Prepared":
        requests.push({
          live,
          request: {
            allocationId: live.allocation.id,
            workloadId: live.workload.id,
            workloadKind: live.workload.kind,
            token: live.allocation.token,
            epoch: live.allocation.epoch,
            profile: live.workload.profile,
            name: live.workload.name,
            launch: p.attempt.launch,
            timeLimitSeconds: p.attempt.timeLimitSeconds,
            allocationDir: p.attempt.allocationDir,
            workspaceDir: p.attempt.workspaceDir,
            ...(fresh.has(live.allocation.id) ? { freshToken: true as const } : {}),
          },
        });
        break;
      default: {
        const unreachable: never = p;
        throw new Error(`unhandled prepare result ${JSON.stringify(unreachable)}`);
      }
    }
  });
  write(env, refusals);
  if (requests.length === 0) return;
  const lane = env.lanes.start(
    "submit",
    requests.map((r) => r.live.allocation.id),
    () => submitAndRecord(env, requests),
  );
  env.started.push(lane);
}

/**
 * The submit lane: one backend call for the tick's attempts, then their answers recorded.
 * Runs after the tick moved on; its writes are compare-and-set like every other step, so
 * an answer that arrives after the world moved (a stop fenced the attempt) is simply not
 * applied, and the next tick resolves that attempt by token.
 */
async function submitAndRecord(
  env: TickEnv,
  requests: readonly { readonly live: Live; readonly request: SubmitRequest }[],
): Promise<void> {
  // Asked before submitting: a backend that starts sandboxing meanwhile only makes this
  // conservative (a sandboxed launch recorded as not sandboxed), never the other way.
  const sandboxed = env.backend.launchesSandboxed();
  const answers = await env.backend.submit(requests.map((r) => r.request));
  env.faultPoint("reconciler.after-submit");
  const recorded: Transition[] = [];
  for (const { live, request } of requests) {
    const answer = answers.get(request.token) ?? {
      kind: "Unknown" as const,
      token: request.token,
      message: "no answer for token",
    };
    if (answer.kind === "Created" || answer.kind === "Existing") env.counters.submitted += 1;
    if (answer.kind === "Unknown") {
      env.log.warn("submission outcome unknown; resolved by token next tick", {
        allocationId: live.allocation.id,
        message: answer.message,
      });
    }
    recorded.push(
      recordSubmitResult(live.workload, live.allocation, answer, env.clock.now(), sandboxed),
    );
  }
  write(env, recorded);
}
