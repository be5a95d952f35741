/**
 * The reconciler tick against the simulated backend at 100, 1,000 and 10,000 active
 * workloads: milliseconds per tick and backend calls per tick. The store is a real SQLite
 * file (WAL, synchronous=FULL, checkpoints on their own thread: as the daemon opens it); the
 * backend answers from memory, so the figure is the reconciler's own cost (store read,
 * planning, diffing), not a scheduler's.
 *
 * Targets: backend calls per tick constant in N; a steady tick (every workload RUNNING,
 * nothing changed) under 50 ms at 10,000 workloads on a 2-core machine.
 *
 * Run: `node_modules/.bin/bun bench/reconciler.bench.ts [N,N,...] [steadyTicks]`.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import {
  createWorkload,
  openDatabase,
  startWalCheckpointer,
} from "../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../src/adapters/store-sqlite/stores/reconciler-store.ts";
import {
  BACKEND_OPERATIONS,
  type BackendOperation,
  createReconciler,
  type TickReport,
} from "../src/core/reconciler.ts";
import { systemClock } from "../src/lib/clock.ts";
import { silentLog } from "../src/lib/log.ts";
import { inertPreparer } from "../test/support/reconciler-harness.ts";
import { createSimulatedBackend } from "../test/support/simulated-backend.ts";

export interface ReconcilerBenchRow {
  readonly workloads: number;
  /** The tick that mints, prepares, submits and records every workload. */
  readonly submitTickMs: number;
  readonly submitTickCalls: number;
  /** The tick that moves every workload QUEUED → RUNNING (N writes). */
  readonly startTickMs: number;
  /** Ticks where nothing changed. */
  readonly steadyTickMs: { readonly median: number; readonly p95: number; readonly max: number };
  readonly steadyCallsPerTick: Readonly<Record<BackendOperation, number>>;
  readonly steadyCallsPerTickTotal: number;
}

export interface ReconcilerBenchResult {
  readonly machine: { readonly nproc: number; readonly cpu: string };
  readonly rows: readonly ReconcilerBenchRow[];
  readonly table: readonly {
    readonly metric: string;
    readonly value: string;
    readonly target?: string;
  }[];
}

export function machine(): { nproc: number; cpu: string } {
  let cpu = "unknown";
  try {
    const line = readFileSync("/proc/cpuinfo", "utf8")
      .split("\n")
      .find((l) => l.startsWith("model name"));
    if (line) cpu = line.split(":").slice(1).join(":").trim();
  } catch {
    // not Linux: leave "unknown"
  }
  return { nproc: availableParallelism(), cpu };
}

async function benchOne(workloads: number, steadyTicks: number): Promise<ReconcilerBenchRow> {
  const dir = mkdtempSync(join(tmpdir(), "o4s-bench-"));
  const path = join(dir, "openai4s.db");
  const opened = openDatabase(path);
  // The daemon's checkpointer thread (daemon.ts), with its defaults.
  const checkpointer = startWalCheckpointer(opened.sqlite, { path, log: silentLog });
  try {
    const deps = { db: opened.db, clock: systemClock };
    deps.db.transaction(() => {
      for (let i = 0; i < workloads; i++) {
        createWorkload(deps, {
          id: `w${String(i).padStart(6, "0")}`,
          kind: "BATCH",
          name: `bench-${i}`,
          profile: "default",
          spec: { command: ["true"], env: { BENCH: "1" } },
          maxAttempts: 1,
          idempotencyKey: null,
          requestHash: null,
        });
      }
    });
    const sim = createSimulatedBackend({ clock: systemClock, recordCalls: false });
    const reconciler = createReconciler({
      store: bindReconcilerStore(deps),
      backend: sim.backend,
      preparer: inertPreparer,
      clock: systemClock,
      log: silentLog,
    });
    const submit = await reconciler.reconcileOnce();
    if (submit.submitted !== workloads) throw new Error(`submitted ${submit.submitted}`);
    for (const job of sim.jobs()) sim.start(job.handle);
    const start = await reconciler.reconcileOnce();
    if (start.writes !== workloads) throw new Error(`started ${start.writes}`);
    for (let i = 0; i < 3; i++) await reconciler.reconcileOnce(); // warm-up
    const steady: TickReport[] = [];
    for (let i = 0; i < steadyTicks; i++) steady.push(await reconciler.reconcileOnce());
    for (const t of steady) {
      if (t.writes !== 0 || t.workloadsConsidered !== workloads) {
        throw new Error(`a steady tick was not steady: ${JSON.stringify(t)}`);
      }
    }
    const ms = steady.map((t) => t.durationMs).sort((a, b) => a - b);
    const at = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? NaN;
    const calls = Object.fromEntries(
      BACKEND_OPERATIONS.map((op) => [op, Math.max(...steady.map((t) => t.backendCalls[op]))]),
    ) as Record<BackendOperation, number>;
    return {
      workloads,
      submitTickMs: submit.durationMs,
      submitTickCalls: submit.backendCallsTotal,
      startTickMs: start.durationMs,
      steadyTickMs: { median: at(0.5), p95: at(0.95), max: ms.at(-1) ?? NaN },
      steadyCallsPerTick: calls,
      steadyCallsPerTickTotal: Math.max(...steady.map((t) => t.backendCallsTotal)),
    };
  } finally {
    await checkpointer.stop();
    opened.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchReconciler(
  sizes: readonly number[] = [100, 1_000, 10_000],
  steadyTicks = 30,
): Promise<ReconcilerBenchResult> {
  const rows: ReconcilerBenchRow[] = [];
  for (const n of sizes) rows.push(await benchOne(n, steadyTicks));
  const f = (n: number) => n.toFixed(1);
  const table = rows.flatMap((r) => [
    {
      metric: `steady tick ms (median/p95), N=${r.workloads}`,
      value: `${f(r.steadyTickMs.median)} / ${f(r.steadyTickMs.p95)}`,
      ...(r.workloads === 10_000 ? { target: "< 50" } : {}),
    },
    {
      metric: `backend calls per steady tick, N=${r.workloads}`,
      value: String(r.steadyCallsPerTickTotal),
      target: "constant in N",
    },
    {
      metric: `submit tick ms (calls), N=${r.workloads}`,
      value: `${f(r.submitTickMs)} (${r.submitTickCalls})`,
    },
  ]);
  return { machine: machine(), rows, table };
}

function printResult(result: ReconcilerBenchResult): void {
  const f = (n: number) => n.toFixed(1);
  console.log(
    `reconciler tick, simulated backend (${result.machine.nproc} cores, ${result.machine.cpu})`,
  );
  console.log(
    "| workloads | steady ms median | p95 | max | backend calls/tick (steady) | submit tick ms | calls | start tick ms |",
  );
  console.log("|---:|---:|---:|---:|---|---:|---:|---:|");
  for (const r of result.rows) {
    const calls = BACKEND_OPERATIONS.filter((op) => r.steadyCallsPerTick[op] > 0)
      .map((op) => `${op} ${r.steadyCallsPerTick[op]}`)
      .join(", ");
    console.log(
      `| ${r.workloads} | ${f(r.steadyTickMs.median)} | ${f(r.steadyTickMs.p95)} | ${f(r.steadyTickMs.max)} | ${r.steadyCallsPerTickTotal} (${calls}) | ${f(r.submitTickMs)} | ${r.submitTickCalls} | ${f(r.startTickMs)} |`,
    );
  }
  console.log("targets: calls per tick constant in N; steady tick < 50 ms at 10,000 workloads");
}

if (import.meta.main) {
  const quick = process.env["O4S_BENCH_QUICK"] === "1";
  const sizes = (process.argv[2] ?? (quick ? "100,10000" : "100,1000,10000"))
    .split(",")
    .map(Number);
  const steadyTicks = Number(process.argv[3] ?? (quick ? 10 : 30));
  const result = await benchReconciler(sizes, steadyTicks);
  printResult(result);
  console.log(JSON.stringify({ bench: "reconciler", ...result }));
}
