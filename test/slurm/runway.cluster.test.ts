/**
 * Runway on the REAL cluster: a job learns its deadline (OPENAI4S_DEADLINE, the scheduler's
 * own end time in epoch seconds) and is warned with SIGURG before its time limit, so it can
 * save its work; the reconciler stores that same end time (TIME_REMAINING) and writes one
 * TIME_LIMIT_NEAR event before it. The scheduler checks signals on its own schedule: the warning is awaited
 * with a deadline, never timed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createSlurmBackend, type SlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import {
  createWorkload,
  getWorkload,
  listAllocations,
  listEvents,
  openDatabase,
  requestStop,
  type StoreDeps,
} from "../../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import { isTerminal } from "../../src/core/models.ts";
import type { ObservationTarget } from "../../src/core/ports/allocation-backend.ts";
import { createReconciler } from "../../src/core/reconciler/create-reconciler.ts";
import { systemClock, systemTimers } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { workloadView } from "../../src/servers/http/views.ts";
import { eventually } from "../support/eventually.ts";
import { handleOf, realBroker, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request, target } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

describe.skipIf(testCluster === null)("slurm-cluster runway", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let backend: SlurmBackend;
  const submitted: ObservationTarget[] = [];

  beforeAll(() => {
    dir = makeTempDir("o4s-slurm-runway-");
    backend = createSlurmBackend({
      broker: realBroker(cluster),
      placements: catalog({
        minute: { ...BASE_PLACEMENT, timeLimitSeconds: 60, warnBeforeLimitSeconds: 50 },
      }),
      clock: systemClock,
      log: silentLog,
    });
  });

  afterAll(async () => {
    await backend.cancel(submitted);
    removeDir(dir);
  });

  test("the job knows its deadline and is warned before the limit", async () => {
    const req = request(
      dir,
      command([
        "/bin/bash",
        "-c",
        'echo "$OPENAI4S_DEADLINE $(date +%s)" > deadline.txt; trap "date +%s > warned.txt; exit 0" URG; for i in $(seq 1 120); do sleep 1; done',
      ]),
      { profile: "minute" },
    );
    const t = target(req, handleOf((await backend.submit([req])).get(req.token)));
    submitted.push(t);
    const deadlineFile = join(req.workspaceDir, "deadline.txt");
    const warnedFile = join(req.workspaceDir, "warned.txt");
    await eventually(() => existsSync(warnedFile), {
      what: "the warning before the limit",
      timeoutMs: 75_000,
      intervalMs: 500,
    });
    const [deadline, startedAt] = readFileSync(deadlineFile, "utf8").trim().split(" ").map(Number);
    // The scheduler's end time: start + the one-minute limit.
    expect(deadline).toBeGreaterThanOrEqual((startedAt ?? 0) + 55);
    expect(deadline).toBeLessThanOrEqual((startedAt ?? 0) + 65);
    const warnedAt = Number(readFileSync(warnedFile, "utf8").trim());
    expect(warnedAt).toBeLessThan(deadline ?? 0);
  }, 90_000);

  test("the reconciler stores the scheduler's end time, shows TIME_REMAINING, and warns once", async () => {
    const opened = openDatabase(":memory:");
    const deps: StoreDeps = { db: opened.db, clock: systemClock };
    const preparer: AttemptPreparer = {
      async prepare(workload, allocation) {
        return {
          kind: "Prepared",
          attempt: {
            launch: command([
              "/bin/bash",
              "-c",
              'echo "$OPENAI4S_DEADLINE" > deadline.txt; for i in $(seq 1 120); do sleep 1; done',
            ]),
            allocationDir: join(dir, "allocations", allocation.id),
            workspaceDir: join(dir, `workspace-${workload.id}`),
            timeLimitSeconds: 60,
          },
        };
      },
    };
    const reconciler = createReconciler({
      timers: systemTimers,
      store: bindReconcilerStore(deps),
      backend,
      preparer,
      clock: systemClock,
      log: silentLog,
    });
    createWorkload(deps, {
      id: "w-runway",
      kind: "BATCH",
      name: "runway",
      profile: "minute",
      spec: { command: ["sleep"] },
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
    });
    try {
      const warnings = () =>
        listEvents(deps, "w-runway").filter((e) => e.reason === "TIME_LIMIT_NEAR");
      const end = Date.now() + 80_000;
      let remainingSeen: number | null = null;
      while (warnings().length === 0) {
        if (Date.now() > end) throw new Error("no TIME_LIMIT_NEAR event before the limit");
        await reconciler.reconcileOnce();
        const w = getWorkload(deps, "w-runway");
        const view = w && workloadView(w, [], listAllocations(deps, w.id), Date.now());
        if (view?.timeRemainingSeconds != null) remainingSeen ??= view.timeRemainingSeconds;
        if (w !== null && w !== undefined && isTerminal(w.phase))
          throw new Error(`ended ${w.phase}`);
        await Bun.sleep(1_000);
      }
      const [allocation] = listAllocations(deps, "w-runway");
      const deadlineFile = join(dir, "workspace-w-runway", "deadline.txt");
      // The end time stored from squeue is the one the job was told (epoch seconds).
      const told = Number(readFileSync(deadlineFile, "utf8").trim());
      expect(allocation?.deadlineAt).toBe(told * 1000);
      expect(remainingSeen).not.toBeNull();
      expect(remainingSeen as number).toBeGreaterThan(0);
      expect(remainingSeen as number).toBeLessThanOrEqual(60);
      const [warning] = warnings();
      // Lead: the profile's 50 s, capped at half the one-minute limit, as the job's --signal.
      expect(warning?.at).toBeGreaterThanOrEqual(told * 1000 - 30_000);
      expect(warning?.at).toBeLessThan(told * 1000);
      await reconciler.reconcileOnce();
      await reconciler.reconcileOnce();
      expect(warnings()).toHaveLength(1);
    } finally {
      requestStop(deps, "w-runway", "USER_CANCELLED", "test over");
      const stopBy = Date.now() + 30_000;
      while (!isTerminal(getWorkload(deps, "w-runway")?.phase ?? "CANCELLED")) {
        if (Date.now() > stopBy) break;
        await reconciler.reconcileOnce();
        await Bun.sleep(500);
      }
      opened.close();
    }
  }, 120_000);
});
