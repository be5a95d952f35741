/**
 * The control plane's timing targets (issue "the control plane never stalls"), measured on
 * the real reconciler loop (`run`, real timers unless said otherwise) over the simulated
 * backend, which answers from memory, so each figure is the control plane's own behaviour:
 *  - bystander cancel while one submission hangs: stop → the backend saw the cancel;
 *  - observe calls per second while the API wakes the loop 100 times a second;
 *  - observe calls per hour with 20 RUNNING workloads and nothing changing (simulated hour);
 *  - first hung call → backend reported degraded;
 *  - steady tick at 10,000 live workloads with 1 % changing per tick, with a backend that
 *    reports its changes and with one that can only list everything, and the process RSS
 *    (the same tick through the real Slurm backend's diff of one squeue: slurm-feed.bench.ts).
 * The figures that need a real scheduler (the same cancel against a lost sbatch answer, POST
 * → visible in the queue) are printed by `slurm.bench.ts`, which skips without a cluster.
 *
 * Run: `node_modules/.bin/bun bench/control-plane.bench.ts` (O4S_BENCH_QUICK=1: smaller).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDaemonMetrics } from "../src/adapters/metrics/daemon-metrics.ts";
import { observeTransitions } from "../src/adapters/metrics/transition-observer.ts";
import {
  createWorkload,
  openDatabase,
  requestStop,
  type StoreDeps,
  startWalCheckpointer,
} from "../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../src/adapters/store-sqlite/stores/reconciler-store.ts";
import type { AllocationBackend } from "../src/core/ports/allocation-backend.ts";
import {
  createReconciler,
  type ReconcilerOptions,
  type ReconcilerStore,
  type Timers,
} from "../src/core/reconciler/create-reconciler.ts";
import { systemClock, systemTimers } from "../src/lib/clock.ts";
import { silentLog } from "../src/lib/log.ts";
import { inertPreparer } from "../test/support/reconciler-harness.ts";
import {
  createSimulatedBackend,
  type SimulatedBackend,
} from "../test/support/simulated-backend.ts";

const quick = process.env["O4S_BENCH_QUICK"] === "1";

interface World {
  readonly deps: StoreDeps;
  readonly sim: SimulatedBackend;
  /** WAL checkpoints the checkpointer thread has run so far. */
  checkpoints(): number;
  add(n: number): string[];
  close(): Promise<void>;
}

function world(): World {
  const dir = mkdtempSync(join(tmpdir(), "o4s-bench-cp-"));
  const path = join(dir, "openai4s.db");
  // As the daemon opens its store (daemon.ts): WAL, synchronous=FULL, checkpoints on a
  // thread of their own with the daemon's defaults.
  const opened = openDatabase(path);
  const checkpointer = startWalCheckpointer(opened.sqlite, { path, log: silentLog });
  const deps: StoreDeps = { db: opened.db, clock: systemClock };
  const sim = createSimulatedBackend({ clock: systemClock, recordCalls: true });
  let seq = 0;
  return {
    deps,
    sim,
    add(n) {
      const ids: string[] = [];
      deps.db.transaction(() => {
        for (let i = 0; i < n; i++) {
          const id = `w${String(++seq).padStart(6, "0")}`;
          createWorkload(deps, {
            id,
            kind: "BATCH",
            name: id,
            profile: "default",
            spec: { command: ["true"] },
            maxAttempts: 1,
            idempotencyKey: null,
            requestHash: null,
          });
          ids.push(id);
        }
      });
      return ids;
    },
    checkpoints: () => checkpointer.stats().runs,
    async close() {
      await checkpointer.stop();
      opened.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The store as the daemon wires it (composition/core.ts): every applied step feeds the
 * metrics, so the tick figures below include what observing them costs.
 */
function daemonStore(deps: StoreDeps): ReconcilerStore {
  return observeTransitions(bindReconcilerStore(deps), createDaemonMetrics()).store;
}

function reconcilerOn(
  w: World,
  extra: Partial<ReconcilerOptions> = {},
  backend?: AllocationBackend,
) {
  const tickDuration = createDaemonMetrics().tickDuration;
  return createReconciler({
    timers: systemTimers,
    store: daemonStore(w.deps),
    onTickEnded: (report) => tickDuration.observe(report.durationMs / 1000),
    backend: backend ?? w.sim.backend,
    preparer: inertPreparer,
    clock: systemClock,
    log: silentLog,
    ...extra,
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Stop → the backend saw the cancel, while another workload's submission hangs. */
async function bystanderCancel(): Promise<{ ms: number; intervalMs: number }> {
  const w = world();
  const minIntervalMs = 1000;
  const r = reconcilerOn(w, { minIntervalMs });
  const abort = new AbortController();
  const loop = r.run(abort.signal);
  try {
    const [bystander] = w.add(1);
    r.wake();
    await until("bystander queued", () => w.sim.jobs().length === 1);
    const job = w.sim.jobs()[0];
    if (!job || !bystander) throw new Error("no job");
    w.sim.start(job.handle);
    w.sim.holdNextSubmit();
    w.add(1);
    r.wake();
    await until("submission hangs", () => w.sim.heldSubmits === 1);
    await sleep(1500);
    const t0 = performance.now();
    requestStop(w.deps, bystander, "USER_CANCELLED", "bench");
    r.wake();
    await until("bystander cancelled", () => w.sim.job(job.handle)?.phase === "CANCELLED");
    return { ms: performance.now() - t0, intervalMs: minIntervalMs };
  } finally {
    w.sim.settleHeld("drop");
    abort.abort();
    await loop;
    await r.idle();
    await w.close();
  }
}

/** Observe calls per second while the API wakes the loop `wakesPerSecond` times a second. */
async function observeRateUnderWakes(seconds: number, wakesPerSecond: number): Promise<number> {
  const w = world();
  const r = reconcilerOn(w);
  const abort = new AbortController();
  w.add(20);
  const loop = r.run(abort.signal);
  try {
    await until("20 queued", () => w.sim.jobs().length === 20);
    const before = w.sim.calls.observe;
    const end = performance.now() + seconds * 1000;
    while (performance.now() < end) {
      w.add(1); // a POST: a new workload and a wake
      r.wake();
      await sleep(1000 / wakesPerSecond);
    }
    return (w.sim.calls.observe - before) / seconds;
  } finally {
    abort.abort();
    await loop;
    await r.idle();
    await w.close();
  }
}

/** Observe calls in one simulated hour, 20 RUNNING workloads, nothing changing. */
async function observesPerIdleHour(): Promise<{ perHour: number; afterWakeMs: number }> {
  const w = world();
  let nowMs = 0;
  const pending = new Map<number, { cb: () => void; dueMs: number }>();
  let next = 0;
  const timers: Timers = {
    after(delayMs, cb) {
      const id = ++next;
      pending.set(id, { cb, dueMs: nowMs + delayMs });
      return () => {
        pending.delete(id);
      };
    },
  };
  const settle = async () => {
    for (let i = 0; i < 20; i++) await new Promise((res) => setImmediate(res));
  };
  const r = reconcilerOn(w, { timers, monotonicMs: () => nowMs });
  w.add(20);
  const abort = new AbortController();
  const loop = r.run(abort.signal);
  try {
    await settle();
    for (const j of w.sim.jobs()) w.sim.start(j.handle);
    const fire = async () => {
      const due = [...pending.values()];
      pending.clear();
      for (const p of due) nowMs = Math.max(nowMs, p.dueMs);
      for (const p of due) p.cb();
      await settle();
    };
    await fire();
    const before = w.sim.calls.observe;
    const start = nowMs;
    while (nowMs - start < 3_600_000) await fire();
    const perHour = w.sim.calls.observe - before;
    // After a wake, a change is seen within the minimum interval.
    const wakeAt = nowMs;
    const seen = w.sim.calls.observe;
    r.wake();
    await settle();
    while (w.sim.calls.observe === seen) await fire();
    return { perHour, afterWakeMs: nowMs - wakeAt };
  } finally {
    abort.abort();
    await loop;
    await w.close();
  }
}

/** First hung observe → backendHealth() says Degraded. */
async function outageToDegraded(): Promise<number> {
  const w = world();
  let hang = false;
  let hungAt = 0;
  const backend: AllocationBackend = {
    ...w.sim.backend,
    observe(targets) {
      if (!hang) return w.sim.backend.observe(targets);
      hungAt ||= performance.now();
      return new Promise(() => {}); // the scheduler stopped answering
    },
  };
  const r = reconcilerOn(w, {}, backend);
  w.add(5);
  const abort = new AbortController();
  const loop = r.run(abort.signal);
  try {
    await until("queued", () => w.sim.jobs().length === 5);
    hang = true;
    r.wake();
    await until("a hung call", () => hungAt > 0);
    await until("degraded", () => r.backendHealth().kind === "Degraded");
    return performance.now() - hungAt;
  } finally {
    abort.abort();
    await w.close();
    void loop;
  }
}

interface Spread {
  readonly median: number;
  readonly p95: number;
}

function spread(values: readonly number[]): Spread {
  const ms = [...values].sort((a, b) => a - b);
  const at = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? NaN;
  return { median: at(0.5), p95: at(0.95) };
}

/**
 * Steady ticks at N live workloads with 1 % of them changing per tick. Besides the whole
 * tick, the part spent inside the backend's observe (the simulation building its answer for
 * N targets: the bench's cost, which a real scheduler's listing replaces with its own) and
 * the part spent committing the tick's writes (N/100 compare-and-set steps, one fsync), so
 * the reconciler's own share can be told apart.
 */
async function churnTicks(
  n: number,
  ticks: number,
  reportsChanges: boolean,
): Promise<{
  tick: Spread;
  observe: Spread;
  write: Spread;
  own: Spread;
  cpu: Spread;
  rssMb: number;
  checkpoints: number;
}> {
  const w = world();
  const sim = createSimulatedBackend({ clock: systemClock, recordCalls: false, reportsChanges });
  let observeMs = 0;
  const timed = async <T>(call: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await call();
    } finally {
      observeMs += performance.now() - t0;
    }
  };
  const inner = sim.backend;
  const feed = inner.capabilities.changes;
  const timedBackend: AllocationBackend = {
    ...inner,
    observe: (targets) => timed(() => inner.observe(targets)),
    capabilities: {
      ...inner.capabilities,
      changes:
        feed === null
          ? null
          : {
              observeChanges: (cursor, targets) =>
                timed(() => feed.observeChanges(cursor, targets)),
            },
    },
  };
  let writeMs = 0;
  const store = daemonStore(w.deps);
  const timedStore: ReconcilerStore = {
    ...store,
    applyTransitions(transitions) {
      const t0 = performance.now();
      try {
        return store.applyTransitions(transitions);
      } finally {
        writeMs += performance.now() - t0;
      }
    },
  };
  const r = reconcilerOn(w, { store: timedStore }, timedBackend);
  try {
    w.add(n);
    await r.reconcileOnce();
    const queued = sim.jobs().map((j) => j.handle);
    await r.reconcileOnce();
    const tick: number[] = [];
    const observe: number[] = [];
    const write: number[] = [];
    const own: number[] = [];
    const cpu: number[] = [];
    const step = Math.max(1, Math.floor(n / 100));
    // The thread's reports reach this thread between ticks only: a fresh one before and
    // after the ticks brackets the checkpoints that ran while they did (give or take one).
    const fresh = async () => {
      const seen = w.checkpoints();
      await until("a checkpointer report", () => w.checkpoints() > seen);
      return w.checkpoints();
    };
    const checkpoints0 = await fresh();
    for (let t = 0; t < ticks; t++) {
      for (const h of queued.splice(0, step)) sim.start(h);
      observeMs = 0;
      writeMs = 0;
      const cpu0 = process.cpuUsage();
      const report = await r.reconcileOnce();
      const used = process.cpuUsage(cpu0);
      if (report.writes !== step) throw new Error(`tick wrote ${report.writes}, not ${step}`);
      cpu.push((used.user + used.system) / 1000);
      tick.push(report.durationMs);
      observe.push(observeMs);
      write.push(writeMs);
      own.push(report.durationMs - observeMs - writeMs);
    }
    const checkpoints = (await fresh()) - checkpoints0;
    return {
      tick: spread(tick),
      observe: spread(observe),
      write: spread(write),
      own: spread(own),
      cpu: spread(cpu),
      rssMb: process.memoryUsage().rss / 2 ** 20,
      checkpoints,
    };
  } finally {
    await w.close();
  }
}

if (import.meta.main) {
  const cancel = await bystanderCancel();
  const rate = await observeRateUnderWakes(quick ? 3 : 10, 100);
  const idle = await observesPerIdleHour();
  const degradedMs = await outageToDegraded();
  // The target figure: a backend that reports what changed (the reconciler looks at that
  // only). Then the same churn with a backend that can only list everything (one without a
  // change feed): every tick observes and compares all 10,000.
  const churn = await churnTicks(10_000, quick ? 20 : 60, true);
  const churnFull = await churnTicks(10_000, quick ? 10 : 30, false);
  const f = (x: number) => x.toFixed(1);
  const table = [
    {
      metric: "bystander cancel while a submission hangs (simulated), ms",
      value: `${f(cancel.ms)} (interval ${cancel.intervalMs})`,
      target: "≤ 2 ticks",
    },
    {
      metric: "observe calls/s under 100 wakes/s",
      value: f(rate),
      target: "≤ 1/s",
    },
    {
      metric: "observe calls per idle hour, 20 RUNNING (simulated time)",
      value: String(idle.perHour),
      target: "≤ 300",
    },
    {
      metric: "wake → next observe after idle back-off, ms (simulated time)",
      value: f(idle.afterWakeMs),
      target: "≤ 1000 (the minimum interval)",
    },
    { metric: "first hung call → degraded, ms", value: f(degradedMs), target: "≤ 2000" },
    {
      metric: "tick ms median / p95, 10,000 live, 1 % changing",
      value: `${f(churn.tick.median)} / ${f(churn.tick.p95)}`,
      target: "≤ 5 / ≤ 10",
    },
    {
      metric: "  of which simulated backend observe (changes since the cursor), ms",
      value: `${f(churn.observe.median)} / ${f(churn.observe.p95)}`,
    },
    {
      metric: "  of which committing the 100 changes (no fsync: progress only), ms",
      value: `${f(churn.write.median)} / ${f(churn.write.p95)}`,
    },
    {
      metric: "  the rest (live view, planning, diffing), ms",
      value: `${f(churn.own.median)} / ${f(churn.own.p95)}`,
    },
    {
      // Beside the ticks, not in them: the store's checkpointer thread copying the WAL into
      // the database file (store/wal-checkpointer.ts), as in the daemon.
      metric: "  WAL checkpoints on the checkpointer thread during these ticks (±1)",
      value: String(churn.checkpoints),
    },
    {
      // CPU time of this process during the tick: what the tick costs apart from waiting for
      // a core on a loaded machine (coarse: the kernel accounts it in ticks). All threads:
      // a checkpoint the thread runs meanwhile counts here too.
      metric: "  CPU ms per tick, median / p95",
      value: `${f(churn.cpu.median)} / ${f(churn.cpu.p95)}`,
    },
    {
      metric: "tick ms median / p95, same churn, backend without a change feed (every tick full)",
      value: `${f(churnFull.tick.median)} / ${f(churnFull.tick.p95)}`,
    },
    {
      metric: "  of which observe / commit / the rest, medians, ms",
      value: `${f(churnFull.observe.median)} / ${f(churnFull.write.median)} / ${f(churnFull.own.median)}`,
    },
    {
      metric: "RSS with 10,000 live workloads, MB",
      value: f(churn.rssMb),
      target: "≤ 200",
    },
  ];
  for (const row of table) {
    console.log(`  ${row.metric}: ${row.value}${"target" in row ? ` (target ${row.target})` : ""}`);
  }
  console.log(JSON.stringify({ bench: "control-plane", table }));
  process.exit(0);
}
