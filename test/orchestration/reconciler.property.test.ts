/**
 * Model-based property test of the reconciler against a simulated backend that answers
 * Unknown after really submitting or after not submitting, rejects, is unavailable for N
 * ticks, loses jobs, finishes jobs, lags on cancel and gives Indeterminate observations,
 * with crashes (a fresh reconciler on the same store) injected before any store write.
 *
 * The backend here does NOT look tokens up before submitting, so "one job per token" holds
 * only if the reconciler itself never retries blindly.
 *
 * Invariants, after every command:
 *  I1 at most one backend job per token (not counting lost ones), one live job per workload;
 *  I2 at most one active allocation per workload;
 *  I3 nothing COMPLETED that the backend did not report finished;
 *  I4 no phase change while the backend is unavailable (beyond starting an attempt whose
 *     submit ends Unknown, fencing, or cancelling a workload that holds nothing);
 *  I5 a terminal workload (CANCELLED included) has no backend job left running;
 *  I6 every submit's token was durable (SUBMITTING) before the call, and a token is
 *     submitted again only after a findByToken answered Absent for it;
 *  I7 a terminal fact is acknowledged only when the allocation is terminal and its workload
 *     terminal or on a later epoch;
 *  I8 a submit request marked `freshToken` (lookup skipped) carries a token no earlier
 *     submit carried.
 * Submissions can also hang in flight (held open across later ticks, crashes included):
 * later ticks must leave such an attempt alone until its answer is recorded, and a crash
 * with one in flight must resolve it by token.
 * Once faults stop, every workload converges to the phase the backend's truth implies, and
 * cancelled ones end CANCELLED with no job left running.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { findAllocationByToken, getWorkload } from "../../src/adapters/store-sqlite/index.ts";
import { toAllocation, toWorkload } from "../../src/adapters/store-sqlite/rows.ts";
import {
  allocations as allocationsTable,
  workloads as workloadsTable,
} from "../../src/adapters/store-sqlite/schema.ts";
import {
  type Allocation,
  isActiveAllocation,
  isTerminal,
  RECOVERABLE_REASONS,
  type Reason,
  type SubmissionToken,
  type Workload,
} from "../../src/core/models.ts";
import type { ReconcilerStore } from "../../src/core/reconciler/create-reconciler.ts";
import { type Harness, harness } from "../support/reconciler-harness.ts";
import {
  isLiveJob,
  type SimJob,
  type SimOperation,
  type SubmitFault,
} from "../support/simulated-backend.ts";

/**
 * How often the interesting cases happened across all runs. Checked at the end so the
 * property cannot pass by never reaching them (a generator change that stopped producing
 * crashes would otherwise go unnoticed).
 */
const reached = {
  crashes: 0,
  outageTicks: 0,
  resubmits: 0,
  recoveries: 0,
  cancelsOfLiveJobs: 0,
  acknowledgements: 0,
  ticksWithSubmissionInFlight: 0,
};

/** Lets the lanes of a reconciler (also a crashed one's) run to their end. */
async function settleLanes(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

class SimulatedCrash extends Error {
  override readonly name = "SimulatedCrash";
}

interface Real {
  readonly h: Harness;
  readonly ids: string[];
  /** Before which store write (1-based, within the current tick) to crash; null: none. */
  crashAt: number | null;
  outageTicks: number;
  /** Operations made to throw for the next tick only (broken infrastructure). */
  readonly throwing: SimOperation[];
  readonly violations: string[];
  /** How far the backend's call log has been checked for blind retries. */
  logChecked: number;
  readonly submittedSinceAbsent: Set<SubmissionToken>;
  readonly everSubmitted: Set<SubmissionToken>;
}

interface Model {
  workloads: number;
}

/**
 * Splits batches into single writes and throws before write #crashAt: any prefix of the
 * tick's writes can be the last one that happened. After the throw the store is dead for
 * this reconciler instance (a crashed process writes nothing more).
 */
function crashable(real: () => Real, inner: ReconcilerStore): ReconcilerStore {
  let writes = 0;
  let dead = false;
  const gate = () => {
    if (dead) throw new SimulatedCrash("store is gone with the crashed process");
    writes += 1;
    const r = real();
    if (r.crashAt !== null && writes >= r.crashAt) {
      dead = true;
      throw new SimulatedCrash(`crash before write ${writes}`);
    }
  };
  const read = () => {
    if (dead) throw new SimulatedCrash("store is gone with the crashed process");
  };
  return {
    loadView: () => {
      read();
      writes = 0;
      return inner.loadView();
    },
    parentStates: (ids) => {
      read();
      return inner.parentStates(ids);
    },
    decodeSpecs: (workloads) => {
      read();
      inner.decodeSpecs(workloads);
    },
    ...(inner.loadViewChanges === undefined
      ? {}
      : {
          loadViewChanges: () => {
            read();
            writes = 0;
            return inner.loadViewChanges?.() ?? { items: new Map(), changed: [], rebuilt: true };
          },
        }),
    findAllocationsByTokens: (tokens) => {
      read();
      return inner.findAllocationsByTokens(tokens);
    },
    mintAttempts: (inputs) =>
      inputs.flatMap((input) => {
        gate();
        return inner.mintAttempts([input]);
      }),
    applyTransitions: (ts) =>
      ts.flatMap((t) => {
        gate();
        return inner.applyTransitions([t]);
      }),
    markAcknowledged: (id) => {
      gate();
      inner.markAcknowledged(id);
    },
  };
}

function setup(reportsChanges: boolean): Real {
  let real: Real | null = null;
  const self = () => {
    if (!real) throw new Error("not ready");
    return real;
  };
  const h = harness({
    // Random rejections in a row would degrade the profile: its own tests cover that
    // (profile-breaker.test.ts); here a rejection is a workload's answer, as it always was.
    profileBreaker: { threshold: 1_000_000, initialBackoffMs: 1, maxBackoffMs: 1 },
    sim: {
      lookupBeforeSubmit: false,
      acknowledger: true,
      reportsChanges,
      onSubmit: (request) => {
        const a = findAllocationByToken(h.deps, request.token);
        if (a === null || a.phase !== "SUBMITTING") {
          self().violations.push(
            `I6: submit of ${request.token} not durable as SUBMITTING (${a?.phase})`,
          );
        }
      },
      onAcknowledge: (token) => {
        reached.acknowledgements += 1;
        const a = findAllocationByToken(h.deps, token);
        const w = a ? getWorkload(h.deps, a.workloadId) : null;
        if (
          !a ||
          !w ||
          !isTerminal(a.phase) ||
          !(isTerminal(w.phase) || w.executionEpoch > a.epoch)
        ) {
          self().violations.push(
            `I7: acknowledged ${token} with allocation ${a?.phase} workload ${w?.phase}`,
          );
        }
      },
    },
    wrapStore: (inner) => crashable(self, inner),
  });
  real = {
    h,
    ids: [],
    crashAt: null,
    outageTicks: 0,
    throwing: [],
    violations: [],
    logChecked: 0,
    submittedSinceAbsent: new Set(),
    everSubmitted: new Set(),
  };
  return real;
}

// ---------------------------------------------------------------------------------------
// Reading the world
// ---------------------------------------------------------------------------------------

interface Snapshot {
  readonly workloads: ReadonlyMap<string, Workload>;
  readonly allocations: ReadonlyMap<string, Allocation>;
}

function snapshot(r: Real): Snapshot {
  // Two queries for everything: this runs after every command of every run.
  const workloads = new Map<string, Workload>();
  const allocations = new Map<string, Allocation>();
  for (const row of r.h.deps.db.select().from(workloadsTable).all()) {
    workloads.set(row.id, toWorkload(row));
  }
  for (const row of r.h.deps.db.select().from(allocationsTable).all()) {
    allocations.set(row.id, toAllocation(row));
  }
  return { workloads, allocations };
}

function jobsOfWorkload(r: Real, workloadId: string): readonly SimJob[] {
  return r.h.sim.jobs().filter((j) => j.request.workloadId === workloadId);
}

function checkInvariants(r: Real, label: string): void {
  const s = snapshot(r);
  const jobs = r.h.sim.jobs();
  const fail = (msg: string) => r.violations.push(`${label}: ${msg}`);

  // I1
  const perToken = new Map<string, number>();
  const livePerWorkload = new Map<string, number>();
  for (const j of jobs) {
    if (j.phase !== "LOST") perToken.set(j.token, (perToken.get(j.token) ?? 0) + 1);
    if (isLiveJob(j)) {
      livePerWorkload.set(
        j.request.workloadId,
        (livePerWorkload.get(j.request.workloadId) ?? 0) + 1,
      );
    }
  }
  for (const [token, n] of perToken) if (n > 1) fail(`I1: ${n} backend jobs for token ${token}`);
  for (const [w, n] of livePerWorkload)
    if (n > 1) fail(`I1: ${n} live backend jobs for workload ${w}`);

  // I2
  const activePerWorkload = new Map<string, number>();
  for (const a of s.allocations.values()) {
    if (isActiveAllocation(a.phase)) {
      activePerWorkload.set(a.workloadId, (activePerWorkload.get(a.workloadId) ?? 0) + 1);
    }
  }
  for (const [w, n] of activePerWorkload) if (n > 1) fail(`I2: ${n} active allocations for ${w}`);

  // I8
  for (const token of r.h.sim.freshTokenViolations) fail(`I8: ${token} sent as fresh twice`);

  // I3
  for (const a of s.allocations.values()) {
    if (a.phase !== "COMPLETED") continue;
    if (!r.h.sim.jobsByToken(a.token).some((j) => j.phase === "COMPLETED")) {
      fail(`I3: allocation ${a.id} COMPLETED but the backend never finished its job`);
    }
  }
  for (const w of s.workloads.values()) {
    if (w.phase !== "COMPLETED") continue;
    const current = [...s.allocations.values()].find(
      (a) => a.workloadId === w.id && a.epoch === w.executionEpoch,
    );
    if (!current || !r.h.sim.jobsByToken(current.token).some((j) => j.phase === "COMPLETED")) {
      fail(`I3: workload ${w.id} COMPLETED but the backend never finished its job`);
    }
  }

  // I5
  for (const w of s.workloads.values()) {
    if (!isTerminal(w.phase)) continue;
    const live = jobsOfWorkload(r, w.id).filter(isLiveJob);
    if (live.length > 0)
      fail(`I5: workload ${w.id} is ${w.phase} with ${live.length} live backend job(s)`);
  }

  // I6 (the second half): walk the backend's call log since the last check.
  const log = r.h.sim.log;
  for (; r.logChecked < log.length; r.logChecked++) {
    const call = log[r.logChecked];
    if (call?.op === "findByToken") {
      for (const [token, answer] of call.answers) {
        if (answer.kind === "Absent") r.submittedSinceAbsent.delete(token);
      }
    } else if (call?.op === "submit") {
      for (const answer of call.answers) {
        if (r.everSubmitted.has(answer.token)) reached.resubmits += 1;
        r.everSubmitted.add(answer.token);
        if (r.submittedSinceAbsent.has(answer.token)) {
          fail(`I6: token ${answer.token} submitted again without an Absent in between`);
        }
        r.submittedSinceAbsent.add(answer.token);
      }
    }
  }
}

/** I4: what may change in a tick during which the backend answered nothing. */
function checkOutageTick(r: Real, before: Snapshot, after: Snapshot): void {
  const fail = (msg: string) => r.violations.push(`I4: ${msg}`);
  for (const [id, b] of before.workloads) {
    const a = after.workloads.get(id);
    if (!a || a.phase === b.phase) continue;
    const stopping = b.desired.kind === "STOP";
    const heldNothing = ![...before.allocations.values()].some(
      (x) => x.workloadId === id && isActiveAllocation(x.phase),
    );
    const ok =
      (b.phase === "PENDING" && a.phase === "SUBMITTING" && !stopping) ||
      (stopping && a.phase === "STOPPING") ||
      (stopping && a.phase === "CANCELLED" && heldNothing);
    if (!ok) fail(`workload ${id} moved ${b.phase} → ${a.phase} while the backend was unavailable`);
  }
  for (const [id, a] of after.allocations) {
    const b = before.allocations.get(id);
    if (!b) {
      if (a.phase !== "SUBMITTING") fail(`allocation ${id} born ${a.phase} during an outage`);
      continue;
    }
    if (a.phase === b.phase) continue;
    const w = after.workloads.get(a.workloadId);
    if (!(w?.desired.kind === "STOP" && a.phase === "STOPPING")) {
      fail(`allocation ${id} moved ${b.phase} → ${a.phase} while the backend was unavailable`);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<Model, Real, false>;

function pick<T>(items: readonly T[], index: number): T | undefined {
  return items.length === 0 ? undefined : items[index % items.length];
}

async function tick(r: Real, crashAt: number | null): Promise<void> {
  const outage = !r.h.sim.available;
  const before = outage ? snapshot(r) : null;
  r.crashAt = crashAt;
  try {
    await r.h.tick();
  } catch (error) {
    if (!(error instanceof SimulatedCrash)) throw error;
    reached.crashes += 1;
    // A submission in flight dies with the process: it landed or it did not.
    r.h.sim.settleHeld(reached.crashes % 2 === 0 ? "land" : "drop");
    await settleLanes();
    r.h.restart();
  } finally {
    r.crashAt = null;
  }
  if (before) {
    reached.outageTicks += 1;
    checkOutageTick(r, before, snapshot(r));
  }
  for (const op of r.throwing.splice(0)) r.h.sim.setThrowing(op, false);
  if (r.outageTicks > 0) {
    r.outageTicks -= 1;
    if (r.outageTicks === 0) r.h.sim.setAvailable(true);
  }
}

const commands: fc.Arbitrary<Cmd>[] = [
  fc.integer({ min: 1, max: 3 }).map(
    (maxAttempts): Cmd => ({
      check: () => true,
      async run(m, r) {
        r.ids.push(r.h.addWorkload({ maxAttempts }));
        m.workloads += 1;
        checkInvariants(r, this.toString());
      },
      toString: () => `Add(maxAttempts=${maxAttempts})`,
    }),
  ),
  // Listed twice: cancelling is where the barrier's crash windows are.
  ...[0, 1].map(() =>
    fc
      .tuple(fc.nat(), fc.constantFrom<Reason>("USER_CANCELLED", "IDLE_TIMEOUT", "MAX_LIFETIME"))
      .map(
        ([index, reason]): Cmd => ({
          check: (m) => m.workloads > 0,
          async run(_m, r) {
            const id = pick(r.ids, index);
            if (id) r.h.stop(id, reason, `stop: ${reason}`);
            checkInvariants(r, this.toString());
          },
          toString: () => `Cancel(${index}, ${reason})`,
        }),
      ),
  ),
  // Ticks are listed three times to make them frequent.
  ...[0, 1, 2].map(() =>
    fc.option(fc.integer({ min: 1, max: 4 }), { freq: 2, nil: null }).map(
      (crashAt): Cmd => ({
        check: () => true,
        async run(_m, r) {
          await tick(r, crashAt);
          checkInvariants(r, this.toString());
        },
        toString: () => (crashAt === null ? "Tick" : `Tick(crash before write ${crashAt})`),
      }),
    ),
  ),
  // A tick whose submission hangs: its lane stays in flight across the commands that follow.
  fc.constant(null).map(
    (): Cmd => ({
      check: () => true,
      async run(_m, r) {
        const heldBefore = r.h.sim.heldSubmits;
        r.h.sim.holdNextSubmit();
        try {
          await r.h.tickNoWait();
        } catch (error) {
          if (!(error instanceof SimulatedCrash)) throw error;
          reached.crashes += 1;
          r.h.sim.settleHeld("drop");
          await settleLanes();
          r.h.restart();
        }
        if (r.h.sim.heldSubmits > heldBefore) reached.ticksWithSubmissionInFlight += 1;
        // Nothing new was submitted (an earlier submission may still hang): disarm, or the
        // hold would catch a later plain Tick's submission, which waits for its commands.
        else r.h.sim.disarmHold();
        checkInvariants(r, this.toString());
      },
      toString: () => "TickWithHungSubmit",
    }),
  ),
  fc.constantFrom("land" as const, "drop" as const).map(
    (how): Cmd => ({
      check: () => true,
      async run(_m, r) {
        r.h.sim.settleHeld(how);
        await settleLanes();
        checkInvariants(r, this.toString());
      },
      toString: () => `SettleHungSubmit(${how})`,
    }),
  ),
  fc.integer({ min: 1, max: 4 }).map(
    (ticks): Cmd => ({
      check: () => true,
      async run(_m, r) {
        r.h.sim.setAvailable(false);
        r.outageTicks = ticks;
        checkInvariants(r, this.toString());
      },
      toString: () => `Outage(${ticks} ticks)`,
    }),
  ),
  fc.constantFrom<SubmitFault>("UNKNOWN_AFTER_CREATE", "UNKNOWN_WITHOUT_CREATE", "REJECT").map(
    (fault): Cmd => ({
      check: () => true,
      async run(_m, r) {
        r.h.sim.failNextSubmits(fault);
        checkInvariants(r, this.toString());
      },
      toString: () => `SubmitFault(${fault})`,
    }),
  ),
  fc.nat().map(
    (index): Cmd => ({
      check: () => true,
      async run(_m, r) {
        const job = pick(
          r.h.sim.jobs().filter((j) => j.phase === "QUEUED"),
          index,
        );
        if (job) r.h.sim.start(job.handle);
        checkInvariants(r, this.toString());
      },
      toString: () => `Start(${index})`,
    }),
  ),
  fc
    .tuple(
      fc.nat(),
      fc.constantFrom(
        { phase: "COMPLETED", reason: null, exitCode: 0 } as const,
        { phase: "FAILED", reason: null, exitCode: 1 } as const,
        { phase: "FAILED", reason: "OUT_OF_MEMORY", exitCode: null } as const,
        { phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED", exitCode: null } as const,
        { phase: "FAILED", reason: "NODE_FAILURE", exitCode: null } as const,
        { phase: "FAILED", reason: "PREEMPTED", exitCode: null } as const,
      ),
    )
    .map(
      ([index, outcome]): Cmd => ({
        check: () => true,
        async run(_m, r) {
          const job = pick(r.h.sim.jobs().filter(isLiveJob), index);
          if (job) r.h.sim.finish(job.handle, outcome);
          checkInvariants(r, this.toString());
        },
        toString: () => `Finish(${index}, ${outcome.phase}/${outcome.reason ?? outcome.exitCode})`,
      }),
    ),
  // Listed twice: losses drive recovery, the path with the most state.
  ...[0, 1].map(() =>
    fc.nat().map(
      (index): Cmd => ({
        check: () => true,
        async run(_m, r) {
          const job = pick(r.h.sim.jobs().filter(isLiveJob), index);
          if (job) r.h.sim.lose(job.handle);
          checkInvariants(r, this.toString());
        },
        toString: () => `Lose(${index})`,
      }),
    ),
  ),
  fc
    .constantFrom<SimOperation>(
      "observe",
      "findByToken",
      "submit",
      "cancel",
      "pendingTerminalFacts",
    )
    .map(
      (op): Cmd => ({
        check: () => true,
        async run(_m, r) {
          r.h.sim.setThrowing(op, true);
          r.throwing.push(op);
          checkInvariants(r, this.toString());
        },
        toString: () => `ThrowNextTick(${op})`,
      }),
    ),
  fc.integer({ min: 0, max: 4 }).map(
    (steps): Cmd => ({
      check: () => true,
      async run(_m, r) {
        r.h.sim.setCancelLagSteps(steps);
        checkInvariants(r, this.toString());
      },
      toString: () => `CancelLag(${steps})`,
    }),
  ),
  fc.tuple(fc.nat(), fc.boolean()).map(
    ([index, on]): Cmd => ({
      check: () => true,
      async run(_m, r) {
        const job = pick(r.h.sim.jobs(), index);
        if (job) r.h.sim.setIndeterminate(job.handle, on);
        checkInvariants(r, this.toString());
      },
      toString: () => `Indeterminate(${index}, ${on})`,
    }),
  ),
];

// ---------------------------------------------------------------------------------------
// Convergence: what the backend's truth implies once faults stop
// ---------------------------------------------------------------------------------------

function lastSubmitAnswer(r: Real, token: SubmissionToken): string | null {
  let last: string | null = null;
  for (const call of r.h.sim.log) {
    if (call.op !== "submit") continue;
    for (const answer of call.answers) if (answer.token === token) last = answer.kind;
  }
  return last;
}

function implied(
  r: Real,
  w: Workload,
  allocations: readonly Allocation[],
): { phase: string; reason: string | null } | string {
  if (w.desired.kind === "STOP") {
    // A stop that arrived while the submission was in flight, answered by a rejection: no
    // job ever existed, and the recorded answer (FAILED, SUBMIT_REJECTED) is the truth.
    const current = allocations.at(-1);
    if (current && w.phase === "FAILED" && lastSubmitAnswer(r, current.token) === "Rejected") {
      return { phase: "FAILED", reason: "SUBMIT_REJECTED" };
    }
    return { phase: "CANCELLED", reason: w.desired.reason };
  }
  if (allocations.length > w.maxAttempts)
    return `${allocations.length} attempts > maxAttempts ${w.maxAttempts}`;
  for (const [i, a] of allocations.entries()) {
    if (a.epoch !== i + 1) return `attempt epochs are not 1..n: ${allocations.map((x) => x.epoch)}`;
  }
  // Every attempt before the last must have ended the backend says recoverably.
  for (const a of allocations.slice(0, -1)) {
    const job = r.h.sim.jobsByToken(a.token).at(-1);
    const reason = job?.phase === "LOST" ? "NOT_FOUND_BY_BACKEND" : job?.reason;
    if (!job || !isTerminal(job.phase) || !reason || !RECOVERABLE_REASONS.has(reason)) {
      return `attempt ${a.epoch} was retried though its job ended ${job?.phase}/${job?.reason}`;
    }
  }
  const current = allocations.at(-1);
  if (!current) return "never attempted although faults stopped";
  // A rejection creates no job, so a token whose last submit was rejected has no newer job
  // (an older one may have been lost before its handle was ever recorded).
  if (lastSubmitAnswer(r, current.token) === "Rejected") {
    return { phase: "FAILED", reason: "SUBMIT_REJECTED" };
  }
  const job = r.h.sim.jobsByToken(current.token).at(-1);
  if (!job) return `attempt ${current.epoch} never reached the backend although faults stopped`;
  switch (job.phase) {
    case "QUEUED":
    case "RUNNING":
      return { phase: job.phase, reason: null };
    case "COMPLETED":
      return { phase: "COMPLETED", reason: "EXITED_ZERO" };
    case "FAILED":
    case "LOST": {
      const reason = job.reason ?? (job.phase === "LOST" ? "NOT_FOUND_BY_BACKEND" : "NONZERO_EXIT");
      if (RECOVERABLE_REASONS.has(reason) && current.epoch < w.maxAttempts) {
        return `attempt ${current.epoch} ended ${reason} with attempts left but was not retried`;
      }
      return { phase: job.phase, reason };
    }
    default:
      return `unexpected backend phase ${job.phase} for a workload that wants to run`;
  }
}

async function converge(r: Real, label: string): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await tick(r, null);
    checkInvariants(r, `${label} tick ${i}`);
  }
  const s = snapshot(r);
  for (const w of s.workloads.values()) {
    const allocations = [...s.allocations.values()]
      .filter((a) => a.workloadId === w.id)
      .sort((x, y) => x.epoch - y.epoch);
    const want = implied(r, w, allocations);
    if (typeof want === "string") {
      r.violations.push(`${label}: workload ${w.id}: ${want}`);
    } else if (w.phase !== want.phase || (want.reason !== null && w.reason !== want.reason)) {
      r.violations.push(
        `${label}: workload ${w.id} is ${w.phase}/${w.reason}, the backend's truth implies ${want.phase}/${want.reason}`,
      );
    }
  }
}

describe("reconciler model-based property", () => {
  // With a backend that reports changes, ticks look only at what changed (the manual clock
  // never brings the periodic full tick): the narrowing alone must keep every invariant.
  test.each([
    ["observing every workload each tick", false],
    ["looking only at what changed", true],
  ])(
    "invariants hold under faults and crashes; once faults stop everything converges (%s)",
    async (_label, reportsChanges) => {
      await fc.assert(
        fc.asyncProperty(
          fc.commands(commands, { maxCommands: 40, size: "medium" }),
          async (cmds) => {
            const r = setup(reportsChanges);
            try {
              await fc.asyncModelRun(() => ({ model: { workloads: 0 }, real: r }), cmds);
              // Faults stop.
              r.h.sim.settleHeld("land");
              await settleLanes();
              r.outageTicks = 0;
              r.h.sim.setAvailable(true);
              r.h.sim.clearSubmitFaults();
              r.h.sim.clearIndeterminate();
              r.h.sim.setCancelLagSteps(0);
              await converge(r, "after faults");
              // Let every job finish; then everything must be terminal, as implied.
              for (const j of r.h.sim.jobs().filter(isLiveJob)) {
                r.h.sim.finish(j.handle, { phase: "COMPLETED", exitCode: 0 });
              }
              await converge(r, "after jobs finished");
              for (const w of snapshot(r).workloads.values()) {
                if (!isTerminal(w.phase))
                  r.violations.push(`final: workload ${w.id} still ${w.phase}`);
              }
              if (r.h.sim.jobs().some(isLiveJob))
                r.violations.push("final: backend jobs still live");
              const pending =
                await r.h.sim.backend.capabilities.terminalFacts?.pendingTerminalFacts();
              if (pending === undefined) throw new Error("made without the acknowledger");
              if (pending.length > 0)
                r.violations.push(`final: ${pending.length} facts never acknowledged`);
              const final = snapshot(r);
              for (const a of final.allocations.values()) if (a.epoch > 1) reached.recoveries += 1;
              for (const w of final.workloads.values()) {
                const jobs = jobsOfWorkload(r, w.id);
                if (w.phase === "CANCELLED" && jobs.some((j) => j.phase === "CANCELLED")) {
                  reached.cancelsOfLiveJobs += 1;
                }
              }
              expect(r.violations).toEqual([]);
            } finally {
              r.h.close();
            }
          },
        ),
        { numRuns: Number(process.env["O4S_PROPERTY_RUNS"] ?? 150) },
      );
      const never = Object.entries(reached).filter(([, count]) => count === 0);
      expect(never).toEqual([]);
    },
    60_000,
  );
});
