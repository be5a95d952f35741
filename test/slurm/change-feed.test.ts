/**
 * The Slurm backend's change feed (`observeChanges`): one squeue per call, diffed against the
 * last parse it returned, on the REAL broker and parser with a fake cluster underneath. The
 * property at the end is the contract: whatever the scheduler does, a caller that follows
 * the feed the way the reconciler does ends each tick knowing what a caller that observes
 * every job each tick knows.
 */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createSlurmBackend, type SlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import {
  createSqueueMemo,
  parseSqueue,
  type QueueRow,
} from "../../src/adapters/backend-slurm/parse-squeue.ts";
import { withPublicMessages } from "../../src/adapters/backend-slurm/public-messages.ts";
import { isTerminal } from "../../src/core/models.ts";
import type {
  AllocationObservation,
  ObservationCursor,
  ObservationTarget,
  ObserveChangesResult,
} from "../../src/core/ports/allocation-backend.ts";
import { type ManualClock, manualClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { type FakeCluster, fakeCluster } from "../support/fake-slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request, target } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const dir = makeTempDir("o4s-slurm-feed-");
afterAll(() => removeDir(dir));

function backendOn(cluster: FakeCluster, clock: ManualClock, instance = "feed"): SlurmBackend {
  return createSlurmBackend({
    broker: createSlurmBroker({ runner: cluster, path: "/usr/bin:/bin" }),
    placements: catalog({ cpu: BASE_PLACEMENT }),
    clock,
    log: silentLog,
    lostGraceMs: 30_000,
    lostMinObservations: 3,
    feedInstance: instance,
  });
}

async function submitJobs(backend: SlurmBackend, n: number): Promise<ObservationTarget[]> {
  const reqs = Array.from({ length: n }, () => request(dir, command(["/bin/true"])));
  const results = await backend.submit(reqs);
  return reqs.map((r) => {
    const result = results.get(r.token);
    if (result?.kind !== "Created") throw new Error(`not created: ${JSON.stringify(result)}`);
    return target(r, result.handle);
  });
}

function observed(result: ObserveChangesResult) {
  if (result.kind !== "Observed") throw new Error(`expected Observed: ${JSON.stringify(result)}`);
  return result;
}

const phaseOf = (o: AllocationObservation | undefined) =>
  o?.kind === "Observed" ? o.phase : o?.kind;

let cluster: FakeCluster;
let clock: ManualClock;
let backend: SlurmBackend;
let jobs: ObservationTarget[];

beforeEach(async () => {
  cluster = fakeCluster();
  clock = manualClock();
  backend = backendOn(cluster, clock);
  jobs = await submitJobs(backend, 5);
  for (const j of jobs) cluster.setState(j.handle, "RUNNING");
});

describe("the squeue memo", () => {
  const line = (id: string, state: string) => `${id}|o4s-name|${state}|0|N/A|N/A|None|/w|(null)\n`;
  const rowsOf = (parsed: ReturnType<typeof parseSqueue>) => {
    if (parsed.kind !== "Parsed") throw new Error(parsed.message);
    return parsed.value;
  };

  test("a line printed again is the same row; a changed or new line is parsed; gone lines leave", () => {
    const memo = createSqueueMemo();
    const [a1, b1] = rowsOf(parseSqueue(line("101", "RUNNING") + line("102", "PENDING"), memo));
    const [a2, b2, c2] = rowsOf(
      parseSqueue(line("101", "RUNNING") + line("102", "RUNNING") + line("103", "PENDING"), memo),
    );
    expect(a2).toBe(a1 as QueueRow);
    expect(b2).not.toBe(b1 as QueueRow);
    expect(b2?.state).toBe("RUNNING");
    expect(c2?.jobId).toBe("103");
    rowsOf(parseSqueue(line("103", "PENDING"), memo));
    expect(memo.byLine.size).toBe(1);
  });

  test("a malformed listing fails whole and leaves none of its lines behind", () => {
    const memo = createSqueueMemo();
    rowsOf(parseSqueue(line("101", "RUNNING"), memo));
    const bad = parseSqueue(`${line("101", "RUNNING")}${line("104", "PENDING")}garbage\n`, memo);
    expect(bad.kind).toBe("Malformed");
    expect([...memo.byLine.keys()]).toEqual([line("101", "RUNNING").trimEnd()]);
  });
});

describe("observeChanges", () => {
  test("a steady queue: one squeue per call, no changes, no sacct", async () => {
    const first = observed(await backend.capabilities.changes.observeChanges(null, jobs));
    expect(first.changes).toEqual([]);
    expect([...first.observations.values()].map(phaseOf)).toEqual(Array(5).fill("RUNNING"));
    const before = { squeue: cluster.count("squeue"), sacct: cluster.count("sacct") };
    let cursor = first.cursor;
    for (let i = 0; i < 3; i++) {
      const next = observed(await backend.capabilities.changes.observeChanges(cursor, []));
      expect(next.changes).toEqual([]);
      expect(next.observations.size).toBe(0);
      cursor = next.cursor;
    }
    expect(cluster.count("squeue")).toBe(before.squeue + 3);
    expect(cluster.count("sacct")).toBe(before.sacct);
  });

  test("a job that is not a target but changed is reported, once", async () => {
    const [a, b] = jobs as [ObservationTarget, ObservationTarget];
    const first = observed(await backend.capabilities.changes.observeChanges(null, jobs));
    cluster.setState(b.handle, "COMPLETED");
    const next = observed(await backend.capabilities.changes.observeChanges(first.cursor, [a]));
    expect(next.observations.size).toBe(1);
    expect(next.changes.map((c) => [c.target.allocationId, phaseOf(c.observation)])).toEqual([
      [b.allocationId, "COMPLETED"],
    ]);
    const after = observed(await backend.capabilities.changes.observeChanges(next.cursor, []));
    expect(after.changes).toEqual([]);
  });

  test("a job that left the queue goes to accounting, and is LOST only after the grace", async () => {
    const b = jobs[1] as ObservationTarget;
    let cursor = observed(await backend.capabilities.changes.observeChanges(null, jobs)).cursor;
    cluster.purge(b.handle);
    const sacctBefore = cluster.count("sacct");
    const gone = observed(await backend.capabilities.changes.observeChanges(cursor, []));
    expect(gone.changes.map((c) => phaseOf(c.observation))).toEqual(["Indeterminate"]);
    expect(cluster.count("sacct")).toBe(sacctBefore + 1);
    cursor = gone.cursor;
    // Followed as a target from then on, as the reconciler does with an unsettled one.
    for (let i = 0; i < 2; i++) {
      clock.advance(20_000);
      const next = observed(await backend.capabilities.changes.observeChanges(cursor, [b]));
      cursor = next.cursor;
      expect(phaseOf(next.observations.get(b.allocationId))).toBe(
        i === 0 ? "Indeterminate" : "LOST",
      );
    }
  });

  test("an unreachable scheduler changes nothing, and the cursor still holds", async () => {
    const first = observed(await backend.capabilities.changes.observeChanges(null, jobs));
    cluster.setState((jobs[0] as ObservationTarget).handle, "COMPLETED");
    cluster.inject("squeue", { kind: "unreachable" });
    expect((await backend.capabilities.changes.observeChanges(first.cursor, [])).kind).toBe(
      "Unavailable",
    );
    const next = observed(await backend.capabilities.changes.observeChanges(first.cursor, []));
    expect(next.changes.map((c) => phaseOf(c.observation))).toEqual(["COMPLETED"]);
  });

  test("behind the public-message rewrite, answers and changes lose the scheduler's names", async () => {
    const [a, b] = jobs as [ObservationTarget, ObservationTarget];
    const shown = withPublicMessages(backend, { values: ["debug"] });
    expect(shown.capabilities.changes).not.toBeNull();
    const first = observed(await shown.capabilities.changes.observeChanges(null, jobs));
    const refusal = "error: Invalid partition name specified (debug)\n";
    cluster.inject("squeue", { kind: "refuse", stderr: refusal });
    const down = await shown.capabilities.changes.observeChanges(first.cursor, [a]);
    expect(down.kind).toBe("Unavailable");
    expect(JSON.stringify(down)).not.toMatch(/partition|debug/i);
    cluster.purge(b.handle);
    cluster.inject("sacct", { kind: "refuse", stderr: refusal });
    const next = observed(await shown.capabilities.changes.observeChanges(first.cursor, [a]));
    expect(next.changes.map((c) => c.target.allocationId)).toEqual([b.allocationId]);
    expect(JSON.stringify(next.changes)).toContain("[hidden]");
    expect(JSON.stringify(next.changes)).not.toMatch(/partition|debug/i);
  });

  test("a cursor it did not give last, or from before a restart, is expired", async () => {
    const first = observed(await backend.capabilities.changes.observeChanges(null, jobs));
    const second = observed(await backend.capabilities.changes.observeChanges(first.cursor, []));
    expect(await backend.capabilities.changes.observeChanges(first.cursor, [])).toEqual({
      kind: "CursorExpired",
    });
    const restarted = backendOn(cluster, clock, "another");
    expect(await restarted.capabilities.changes.observeChanges(second.cursor, [])).toEqual({
      kind: "CursorExpired",
    });
    expect(await backend.capabilities.changes.observeChanges("x" as ObservationCursor, [])).toEqual(
      {
        kind: "CursorExpired",
      },
    );
  });
});

// ---------------------------------------------------------------------------------------
// The contract: the incremental path knows what the full path knows, tick by tick.
// ---------------------------------------------------------------------------------------

const STATES: readonly (readonly [string, number])[] = [
  ["PENDING", 0],
  ["RUNNING", 0],
  ["COMPLETING", 0],
  ["COMPLETED", 0],
  ["FAILED", 256],
  ["FAILED", 9],
  ["CANCELLED", 15],
  ["TIMEOUT", 0],
  ["OUT_OF_MEMORY", 0],
  ["NODE_FAIL", 0],
  ["PREEMPTED", 0],
  ["SUSPENDED", 0],
];

type Event =
  | { readonly kind: "state"; readonly job: number; readonly state: number }
  | { readonly kind: "purge"; readonly job: number }
  | { readonly kind: "sync" }
  | { readonly kind: "squeueDown" }
  | { readonly kind: "sacctDown" };

interface Tick {
  readonly events: readonly Event[];
  readonly advanceMs: number;
  /** Jobs the incremental caller looks at anyway (written since the last tick). */
  readonly dirty: readonly number[];
  readonly fullDue: boolean;
}

const JOBS = 6;
const eventArb: fc.Arbitrary<Event> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("state" as const),
      job: fc.nat(JOBS - 1),
      state: fc.nat(STATES.length - 1),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("purge" as const), job: fc.nat(JOBS - 1) }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: "sync" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "squeueDown" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "sacctDown" as const }) },
);
const tickArb: fc.Arbitrary<Tick> = fc.record({
  events: fc.array(eventArb, { maxLength: 3 }),
  advanceMs: fc.integer({ min: 0, max: 25_000 }),
  dirty: fc.array(fc.nat(JOBS - 1), { maxLength: 2 }),
  fullDue: fc.boolean(),
});

/** What a caller knows of each allocation after a tick; ended ones are no longer watched. */
type Knowledge = Map<string, AllocationObservation>;
const ended = (o: AllocationObservation | undefined) =>
  o?.kind === "Observed" && isTerminal(o.phase);
const settled = (o: AllocationObservation | undefined) => o?.kind === "Observed";

async function fullTick(b: SlurmBackend, all: readonly ObservationTarget[], known: Knowledge) {
  const live = all.filter((t) => !ended(known.get(t.allocationId)));
  const result = await b.observe(live);
  if (result.kind !== "Observed") return;
  for (const [id, o] of result.observations) known.set(id, o);
}

/** The reconciler's protocol (tick.ts): targets are what it must look at; changes do the rest. */
async function incrementalTick(
  b: SlurmBackend,
  all: readonly ObservationTarget[],
  known: Knowledge,
  feed: { cursor: ObservationCursor | null },
  tick: Tick,
) {
  const live = all.filter((t) => !ended(known.get(t.allocationId)));
  const full = feed.cursor === null || tick.fullDue;
  const dirty = new Set(tick.dirty.map((i) => all[i]?.allocationId));
  const targets = full
    ? live
    : live.filter((t) => !settled(known.get(t.allocationId)) || dirty.has(t.allocationId));
  const result = await b.capabilities.changes.observeChanges(full ? null : feed.cursor, targets);
  feed.cursor = null;
  if (result.kind !== "Observed") return;
  for (const [id, o] of result.observations) known.set(id, o);
  const looked = new Set(targets.map((t) => t.allocationId));
  for (const change of result.changes) {
    const id = change.target.allocationId;
    if (looked.has(id) || ended(known.get(id))) continue;
    known.set(id, change.observation);
  }
  feed.cursor = result.cursor;
}

describe("full and incremental observation agree", () => {
  test("over generated scheduler histories (outages, purges, lagging accounting)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(tickArb, { minLength: 1, maxLength: 25 }), async (ticks) => {
        const cluster = fakeCluster();
        const clock = manualClock();
        const full = backendOn(cluster, clock, "full");
        const incremental = backendOn(cluster, clock, "incremental");
        const all = await submitJobs(full, JOBS);
        const knownFull: Knowledge = new Map();
        const knownIncremental: Knowledge = new Map();
        const feed = { cursor: null as ObservationCursor | null };
        for (const tick of ticks) {
          let squeueDown = false;
          let sacctDown = false;
          for (const e of tick.events) {
            const job = "job" in e ? (all[e.job] as ObservationTarget) : null;
            if (e.kind === "state" && job !== null && cluster.jobs.has(job.handle)) {
              const [state, wait] = STATES[e.state] as readonly [string, number];
              cluster.setState(job.handle, state, wait);
            } else if (e.kind === "purge" && job !== null) cluster.purge(job.handle);
            else if (e.kind === "sync") cluster.syncAccounting();
            else if (e.kind === "squeueDown") squeueDown = true;
            else if (e.kind === "sacctDown") sacctDown = true;
          }
          clock.advance(tick.advanceMs);
          cluster.persist("squeue", squeueDown ? { kind: "unreachable" } : null);
          cluster.persist("sacct", sacctDown ? { kind: "unreachable" } : null);
          await fullTick(full, all, knownFull);
          await incrementalTick(incremental, all, knownIncremental, feed, tick);
          expect(Object.fromEntries(knownIncremental)).toEqual(Object.fromEntries(knownFull));
        }
      }),
      { numRuns: 150 },
    );
  });
});
