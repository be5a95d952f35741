/**
 * The reconciler's cached live view against a fresh read of the store, after random
 * operations: the reconciler's own steps (mint, submit, follow, cancel barrier), API writes
 * (create, stop, activity), the backend moving jobs, and writes through ANOTHER connection
 * to the same file. After each operation the cache must equal the full snapshot.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import fc from "fast-check";
import {
  createWorkload,
  loadReconcileSnapshot,
  openDatabase,
  requestStop,
  type StoreDeps,
  touchActivity,
} from "../../src/adapters/store-sqlite/index.ts";
import { createLiveView } from "../../src/adapters/store-sqlite/stores/reconciler-live-view.ts";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import type { ReconcileItem } from "../../src/core/ports/reconciler-store.ts";
import { createReconciler } from "../../src/core/reconciler/create-reconciler.ts";
import { manualClock, systemTimers } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { inertPreparer, seededBytes } from "../support/reconciler-harness.ts";
import { createSimulatedBackend } from "../support/simulated-backend.ts";
import { tempDir } from "../support/temp-dir.ts";

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanup.splice(0).reverse()) c();
});

type Op =
  | { readonly kind: "create" }
  | { readonly kind: "stop"; readonly index: number; readonly otherConnection: boolean }
  | { readonly kind: "touch"; readonly index: number; readonly otherConnection: boolean }
  | { readonly kind: "tick" }
  | { readonly kind: "start" | "finish" | "lose"; readonly index: number }
  | { readonly kind: "restart" };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ kind: "create" as const }),
  fc.record({ kind: fc.constant("stop" as const), index: fc.nat(), otherConnection: fc.boolean() }),
  fc.record({
    kind: fc.constant("touch" as const),
    index: fc.nat(),
    otherConnection: fc.boolean(),
  }),
  fc.constant({ kind: "tick" as const }),
  fc.constant({ kind: "tick" as const }),
  fc.record({
    kind: fc.constantFrom("start" as const, "finish" as const, "lose" as const),
    index: fc.nat(),
  }),
  fc.constant({ kind: "restart" as const }),
);

const byId = (items: readonly ReconcileItem[]) =>
  [...items].sort((a, b) => a.workload.id.localeCompare(b.workload.id));

describe("cached live view", () => {
  test("equals a fresh read of the store after any sequence of operations", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
        using scratch = tempDir("o4s-live-view-");
        const dir = scratch.path;
        const clock = manualClock();
        const main = openDatabase(join(dir, "db"));
        const other = openDatabase(join(dir, "db"));
        try {
          const deps: StoreDeps = { db: main.db, clock };
          const otherDeps: StoreDeps = { db: other.db, clock };
          const sim = createSimulatedBackend({ clock });
          const random = seededBytes();
          let seq = 0;
          const ids: string[] = [];
          const build = () =>
            createReconciler({
              timers: systemTimers,
              store: bindReconcilerStore(deps),
              backend: sim.backend,
              preparer: inertPreparer,
              clock,
              log: memoryLog(),
              randomBytes: random,
              newAllocationId: () => `a${++seq}`,
            });
          let reconciler = build();
          let view = createLiveView(deps);
          const pick = (i: number) => (ids.length === 0 ? undefined : ids[i % ids.length]);
          for (const o of ops) {
            clock.advance(1000);
            switch (o.kind) {
              case "create": {
                const id = `w${ids.length}`;
                createWorkload(deps, {
                  id,
                  kind: "BATCH",
                  name: id,
                  profile: "default",
                  spec: { command: ["true"] },
                  maxAttempts: 2,
                  idempotencyKey: null,
                  requestHash: null,
                });
                ids.push(id);
                break;
              }
              case "stop": {
                const id = pick(o.index);
                if (id)
                  requestStop(o.otherConnection ? otherDeps : deps, id, "USER_CANCELLED", "x");
                break;
              }
              case "touch": {
                const id = pick(o.index);
                if (id) touchActivity(o.otherConnection ? otherDeps : deps, id);
                break;
              }
              case "tick":
                sim.step();
                await reconciler.reconcileOnce();
                break;
              case "start":
              case "finish":
              case "lose": {
                const live = sim
                  .jobs()
                  .filter((j) => j.phase === "QUEUED" || j.phase === "RUNNING");
                const job = live.length === 0 ? undefined : live[o.index % live.length];
                if (!job) break;
                if (o.kind === "start") sim.start(job.handle);
                else if (o.kind === "finish")
                  sim.finish(job.handle, { phase: "COMPLETED", exitCode: 0 });
                else sim.lose(job.handle);
                break;
              }
              case "restart":
                reconciler = build();
                view = createLiveView(deps);
                break;
              default: {
                const never: never = o;
                throw new Error(`unhandled ${JSON.stringify(never)}`);
              }
            }
            expect(byId(view.load())).toEqual(byId(loadReconcileSnapshot(deps)));
          }
        } finally {
          main.close();
          other.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 60_000);
});
