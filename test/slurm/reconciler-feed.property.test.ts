/**
 * The same scheduler history, two daemons: one whose Slurm backend reports changes (the
 * reconciler's focused ticks) and one with that capability taken away (every tick observes
 * every job). Each has its own fake cluster, driven by the same generated events, and the
 * real backend, broker and parser. After every tick both stores must hold the same
 * decisions: each workload's phase, reason and exit code, and how many attempts it made.
 * A focused tick that missed a change, or acted on one a full tick would not, shows here.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import fc from "fast-check";
import { createSlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import {
  createWorkload,
  listAllocations,
  listWorkloads,
  openDatabase,
  requestStop,
  type StoreDeps,
} from "../../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import type { AllocationBackend } from "../../src/core/ports/allocation-backend.ts";
import { createReconciler } from "../../src/core/reconciler/create-reconciler.ts";
import { manualClock, systemTimers } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { fakeCluster } from "../support/fake-slurm-cluster.ts";
import { BASE_PLACEMENT, catalog } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const dir = makeTempDir("o4s-slurm-feed-prop-");
afterAll(() => removeDir(dir));

const WORKLOADS = 4;
/** Job ids the fake cluster hands out, in order: 100, 101, ... (retries make more). */
const JOB_IDS = 8;
const STATES: readonly (readonly [string, number])[] = [
  ["RUNNING", 0],
  ["RUNNING", 0],
  ["COMPLETED", 0],
  ["FAILED", 256],
  ["CANCELLED", 15],
  ["TIMEOUT", 0],
  ["NODE_FAIL", 0],
  ["PREEMPTED", 0],
  ["PENDING", 0],
];

type Event =
  | { readonly kind: "state"; readonly job: number; readonly state: number }
  | { readonly kind: "purge"; readonly job: number }
  | { readonly kind: "sync" }
  | { readonly kind: "stop"; readonly workload: number }
  | { readonly kind: "squeueDown" }
  | { readonly kind: "sacctDown" };

const eventArb: fc.Arbitrary<Event> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("state" as const),
      job: fc.nat(JOB_IDS - 1),
      state: fc.nat(STATES.length - 1),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("purge" as const), job: fc.nat(JOB_IDS - 1) }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: "sync" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("stop" as const), workload: fc.nat(WORKLOADS - 1) }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "squeueDown" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "sacctDown" as const }) },
);
const tickArb = fc.record({
  events: fc.array(eventArb, { maxLength: 3 }),
  advanceMs: fc.integer({ min: 0, max: 25_000 }),
});

function world(name: string, feed: boolean, clock: ReturnType<typeof manualClock>) {
  const cluster = fakeCluster();
  const slurm = createSlurmBackend({
    broker: createSlurmBroker({ runner: cluster, path: "/usr/bin:/bin" }),
    placements: catalog({ cpu: BASE_PLACEMENT }),
    clock,
    log: silentLog,
    lostGraceMs: 30_000,
    lostMinObservations: 3,
    feedInstance: name,
  });
  const listing: AllocationBackend = {
    ...slurm,
    capabilities: { ...slurm.capabilities, changes: null },
  };
  const backend: AllocationBackend = feed ? slurm : listing;
  const opened = openDatabase(":memory:");
  const deps: StoreDeps = { db: opened.db, clock };
  const preparer: AttemptPreparer = {
    async prepare(workload, allocation) {
      return {
        kind: "Prepared",
        attempt: {
          launch: { kind: "COMMAND", command: ["true"], env: {} },
          allocationDir: join(dir, name, "allocations", allocation.id),
          workspaceDir: join(dir, name, "workspaces", workload.id),
          timeLimitSeconds: null,
        },
      };
    },
  };
  const reconciler = createReconciler({
    timers: systemTimers,
    store: bindReconcilerStore(deps),
    backend,
    preparer,
    clock,
    log: silentLog,
    // Focused ticks throughout: only a lost cursor or an outage makes one full.
    fullObserveIntervalMs: 3_600_000,
  });
  for (let i = 0; i < WORKLOADS; i++) {
    createWorkload(deps, {
      id: `w${i}`,
      kind: "BATCH",
      name: `w${i}`,
      profile: "cpu",
      spec: { command: ["true"] },
      maxAttempts: 2,
      idempotencyKey: null,
      requestHash: null,
    });
  }
  const decisions = () =>
    listWorkloads(deps, { limit: 100 }).items.map((w) => ({
      id: w.id,
      phase: w.phase,
      reason: w.reason,
      exitCode: w.exitCode,
      attempts: listAllocations(deps, w.id).length,
    }));
  return { cluster, deps, reconciler, decisions, close: () => opened.close() };
}

describe("the reconciler decides alike through the Slurm feed and through full observes", () => {
  test("over generated scheduler histories", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(tickArb, { minLength: 1, maxLength: 20 }), async (ticks) => {
        run += 1;
        const clock = manualClock();
        const focused = world(`focused-${run}`, true, clock);
        const full = world(`full-${run}`, false, clock);
        try {
          await focused.reconciler.reconcileOnce();
          await full.reconciler.reconcileOnce();
          for (const tick of ticks) {
            let squeueDown = false;
            let sacctDown = false;
            for (const e of tick.events) {
              if (e.kind === "squeueDown") squeueDown = true;
              else if (e.kind === "sacctDown") sacctDown = true;
              for (const w of [focused, full]) {
                if (e.kind === "state") {
                  const id = String(100 + e.job);
                  const [state, wait] = STATES[e.state] as readonly [string, number];
                  if (w.cluster.jobs.has(id)) w.cluster.setState(id, state, wait);
                } else if (e.kind === "purge") w.cluster.purge(String(100 + e.job));
                else if (e.kind === "sync") w.cluster.syncAccounting();
                else if (e.kind === "stop") {
                  requestStop(w.deps, `w${e.workload}`, "USER_CANCELLED", "property");
                }
              }
            }
            clock.advance(tick.advanceMs);
            for (const w of [focused, full]) {
              w.cluster.persist("squeue", squeueDown ? { kind: "unreachable" } : null);
              w.cluster.persist("sacct", sacctDown ? { kind: "unreachable" } : null);
              await w.reconciler.reconcileOnce();
            }
            expect(focused.decisions()).toEqual(full.decisions());
          }
        } finally {
          focused.close();
          full.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 120_000);
});
