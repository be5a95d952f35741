/**
 * The /ui workload list rendered server-side: routing, the keyset query and the JSX render
 * of one 50-row page, timed in process (`app.request`, no socket) on stores holding 10,000
 * and 100,000 workloads. Pages: the newest, one deep in the history (an `after` key near
 * the end), and a phase filter. Targets: p95 <= 50 ms at 10,000 and <= 100 ms at 100,000.
 * And /ui/sessions on stores that hold no session at all (1,000 and 100,000 BATCH
 * workloads): its median at 100,000 within 1.5x its median at 1,000, measured in the same
 * run (issue 34: it walked every workload, 35 ms at 10,000 and 307 ms at 100,000).
 *
 * Run: `node_modules/.bin/bun bench/ui.bench.ts` (O4S_BENCH_QUICK=1: fewer renders).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultLocalProfiles } from "../src/adapters/backend-local/backend-options.ts";
import { openDatabase } from "../src/adapters/store-sqlite/index.ts";
import { bindAdmissionStore } from "../src/adapters/store-sqlite/stores/admission-store.ts";
import type { AllocationBackend } from "../src/core/ports/allocation-backend.ts";
import { systemClock, systemTimers } from "../src/lib/clock.ts";
import { silentLog } from "../src/lib/log.ts";
import { createApp } from "../src/servers/http/app.ts";

const quick = process.env["O4S_BENCH_QUICK"] === "1";
const RENDERS = quick ? 30 : 200;
const PHASES = ["COMPLETED", "FAILED", "CANCELLED", "RUNNING"] as const;

function seed(client: import("bun:sqlite").Database, count: number): void {
  const insert = client.prepare(
    `INSERT INTO workloads (id, kind, name, profile, spec_json, spec_revision, phase, reason,
       message, desired, execution_epoch, max_attempts, exit_code, created_at, updated_at)
     VALUES (?1, 'BATCH', ?2, 'default', '{"command":["true"]}', 1, ?3, 'EXITED_ZERO',
       'done', 'RUN', 1, 1, 0, ?4, ?4)`,
  );
  const start = Date.now() - count * 1000;
  client.transaction(() => {
    for (let i = 0; i < count; i++) {
      // One in 100 still RUNNING: a filter on it must skip most of the history.
      const phase = i % 100 === 0 ? "RUNNING" : (PHASES[i % 3] ?? "COMPLETED");
      insert.run(`w-${String(i).padStart(7, "0")}`, `bench ${i}`, phase, start + i * 1000);
    }
  })();
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
}

async function timeRenders(
  app: ReturnType<typeof createApp>,
  path: string,
  minRows = 51,
): Promise<{ p50Ms: number; p95Ms: number }> {
  const access = { access: { kind: "LocalSocket" as const } };
  // Warm: prepared statements compiled, JIT settled.
  const warm = await (await app.request(path, {}, access)).text();
  // A page that rendered no rows would time nothing worth knowing.
  const rows = warm.match(/<tr>/g)?.length ?? 0;
  if (rows < minRows) throw new Error(`${path}: ${rows - 1} rows rendered, not a full page`);
  for (let i = 0; i < 5; i++) await (await app.request(path, {}, access)).text();
  const times: number[] = [];
  for (let i = 0; i < RENDERS; i++) {
    const t0 = performance.now();
    const res = await app.request(path, {}, access);
    await res.text();
    times.push(performance.now() - t0);
    if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
  }
  times.sort((a, b) => a - b);
  return { p50Ms: percentile(times, 0.5), p95Ms: percentile(times, 0.95) };
}

async function measure(count: number, targetMs: number) {
  let sessionsP50Ms = 0;
  const dir = mkdtempSync(join(tmpdir(), "o4s-bench-ui-"));
  try {
    const opened = openDatabase(join(dir, "openai4s.db"));
    seed(opened.sqlite, count);
    const store = { db: opened.db, clock: systemClock };
    const backend = {
      name: "bench",
      profiles: () => defaultLocalProfiles(),
    } as unknown as AllocationBackend;
    const app = createApp({
      store,
      timers: systemTimers,
      presence: { seen() {}, whileRunning: () => () => {} },
      admission: bindAdmissionStore(store),
      backend,
      reconciler: {
        wake() {},
        admitted() {},
        lastTick: () => null,
        backendHealth: () => ({ kind: "Healthy" }),
        backendCallRate: () => ({ perSecond: 0, totals: {} }),
      },
      clock: systemClock,
      log: silentLog,
      logFile: () => join(dir, "none"),
      backup: {
        snapshot: () => "",
        keepBeside: () => [],
        lastTakenAt: () => null,
        recordTaken: () => {},
      },
      // The list page reads no workspace; these routes are mounted but never called here.
      files: {
        spool: dir,
        workspaceDir: (id) => join(dir, id),
        claimIdentity: () => null,
        maxUploadBytes: 0,
      },
      version: "bench",
    });
    const deepAt = Date.now() - count * 1000 + 200 * 1000;
    const pages = {
      newest: "/ui/workloads",
      deep: `/ui/workloads?after=${deepAt}.w-0000200`,
      running: "/ui/workloads?phase=RUNNING",
    };
    const rows = [];
    // The workloads pages at 10,000 and up (a smaller store has no full page of RUNNING).
    for (const [name, path] of count < 10_000 ? [] : Object.entries(pages)) {
      const t = await timeRenders(app, path);
      rows.push({
        metric: `list page ${name} @${count} p95 ms (p50 ${t.p50Ms.toFixed(1)})`,
        value: t.p95Ms.toFixed(1),
        target: `<= ${targetMs}`,
      });
    }
    // No session in the store: the page is empty, and must cost what an empty page costs.
    sessionsP50Ms = (await timeRenders(app, "/ui/sessions", 0)).p50Ms;
    opened.close();
    return { rows, sessionsP50Ms };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const small = await measure(1_000, 50);
  const mid = await measure(10_000, 50);
  const large = await measure(100_000, 100);
  const ratio = large.sessionsP50Ms / Math.max(small.sessionsP50Ms, 0.001);
  const table = [
    ...mid.rows,
    ...large.rows,
    {
      metric: `/ui/sessions, no sessions, p50 ms @1000 / @100000`,
      value: `${small.sessionsP50Ms.toFixed(2)} / ${large.sessionsP50Ms.toFixed(2)} (${ratio.toFixed(2)}x)`,
      target: `<= 1.5x: ${ratio <= 1.5 ? "met" : "NOT met"}`,
    },
  ];
  for (const r of table) console.log(`${r.metric}: ${r.value} (target ${r.target})`);
  console.log(JSON.stringify({ bench: "ui", table }));
}
