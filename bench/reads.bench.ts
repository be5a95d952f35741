/**
 * Reads that scale: `GET /v1/workloads?limit=100` and `GET /v1/workloads/{id}` on a daemon
 * whose store holds 10,000 workloads (each with an allocation), driven by wrk over loopback
 * TCP with 32 connections. Targets: list >= 2,000 req/s (p99 reported), show >= 10,000
 * req/s, on this 2-core machine. `/healthz` on the same daemon is printed beside them, so a
 * slow figure can be told apart from a slow machine. Skips with one line without wrk.
 *
 * Run: `node_modules/.bin/bun bench/reads.bench.ts` (O4S_BENCH_QUICK=1: 2 s per route).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/adapters/store-sqlite/index.ts";
import { startDaemon } from "../src/apps/daemon/daemon.ts";
import { stateLayout } from "../src/core/layout.ts";
import { systemClock } from "../src/lib/clock.ts";
import { jsonLog } from "../src/lib/log.ts";

const quick = process.env["O4S_BENCH_QUICK"] === "1";
const WORKLOADS = 10_000;

function seed(path: string): string {
  const db = openDatabase(path);
  const client = db.db.$client;
  const now = Date.now();
  const insertW = client.prepare(
    `INSERT INTO workloads (id, kind, name, profile, spec_json, spec_revision, phase, reason,
       message, desired, execution_epoch, max_attempts, exit_code, created_at, updated_at)
     VALUES (?1, 'BATCH', ?2, 'default', '{"command":["true"]}', 1, 'COMPLETED', 'EXITED_ZERO',
       'done', 'RUN', 1, 1, 0, ?3, ?3)`,
  );
  const insertA = client.prepare(
    `INSERT INTO allocations (id, workload_id, epoch, token, handle, phase, reason, message,
       exit_code, submitted_at, started_at, ended_at, created_at)
     VALUES (?1, ?2, 1, ?3, ?4, 'COMPLETED', 'EXITED_ZERO', 'done', 0, ?5, ?5, ?5, ?5)`,
  );
  let last = "";
  client.transaction(() => {
    for (let i = 0; i < WORKLOADS; i++) {
      const id = crypto.randomUUID();
      insertW.run(id, `bench-${i}`, now + i);
      insertA.run(
        crypto.randomUUID(),
        id,
        `o4s-bench${String(i).padStart(21, "0")}`,
        `local-${i}`,
        now + i,
      );
      last = id;
    }
  })();
  db.close();
  return last;
}

interface WrkFigures {
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
}

function parseMs(text: string): number {
  const m = /([\d.]+)(us|ms|s)/.exec(text);
  if (!m) return Number.NaN;
  const v = Number(m[1]);
  return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v;
}

async function wrk(url: string, token: string, seconds: number): Promise<WrkFigures> {
  const child = Bun.spawn(
    [
      "wrk",
      "-t2",
      "-c32",
      `-d${seconds}s`,
      "--latency",
      "-H",
      `Authorization: Bearer ${token}`,
      url,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  const out = await new Response(child.stdout).text();
  if ((await child.exited) !== 0) throw new Error(`wrk failed: ${out}`);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN);
  const p50 = parseMs(/\s50%\s+(\S+)/.exec(out)?.[1] ?? "");
  const p99 = parseMs(/\s99%\s+(\S+)/.exec(out)?.[1] ?? "");
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  return { requestsPerSecond: rps, p50Ms: p50, p99Ms: p99, non2xx };
}

if (import.meta.main) {
  if (Bun.which("wrk") === null) {
    console.log("reads bench skipped: wrk is not installed");
    process.exit(0);
  }
  const dir = mkdtempSync(join(tmpdir(), "o4s-bench-reads-"));
  const stateDir = join(dir, "state");
  const layout = stateLayout(stateDir);
  const log = jsonLog(() => {}, { level: "error" });
  // First start creates the state dir and schema; the seed goes in while it is stopped.
  const first = await startDaemon({
    stateDir,
    listen: [{ kind: "tcp", host: "127.0.0.1", port: 0 }],
    backend: "local",
    clusterConfigPath: null,
    version: "bench",
    env: process.env,
    selfCommand: [process.execPath, join(import.meta.dir, "../src/main.ts")],
    clock: systemClock,
    log,
  });
  if (first.kind !== "Started") throw new Error(`daemon: ${first.kind}: ${first.message}`);
  await first.daemon.stop();
  const someId = seed(layout.database);
  const started = await startDaemon({
    stateDir,
    listen: [{ kind: "tcp", host: "127.0.0.1", port: 0 }],
    backend: "local",
    clusterConfigPath: null,
    version: "bench",
    env: process.env,
    selfCommand: [process.execPath, join(import.meta.dir, "../src/main.ts")],
    clock: systemClock,
    log,
  });
  if (started.kind !== "Started") throw new Error(`daemon: ${started.kind}: ${started.message}`);
  const base = `http://${started.daemon.listening[0]}`;
  const token = readFileSync(layout.adminToken, "utf8").trim();
  const seconds = quick ? 2 : 10;
  try {
    for (const path of ["/v1/workloads?limit=100", `/v1/workloads/${someId}`]) {
      const r = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    }
    const list = await wrk(`${base}/v1/workloads?limit=100`, token, seconds);
    const show = await wrk(`${base}/v1/workloads/${someId}`, token, seconds);
    const health = await wrk(`${base}/healthz`, token, seconds);
    const row = (f: WrkFigures) =>
      `${f.requestsPerSecond.toFixed(0)} req/s, p50 ${f.p50Ms.toFixed(2)} ms, p99 ${f.p99Ms.toFixed(2)} ms${f.non2xx > 0 ? `, ${f.non2xx} non-2xx` : ""}`;
    const table = [
      {
        metric: "GET /v1/workloads?limit=100, 10,000 workloads, 32 conns",
        value: row(list),
        target: "≥ 2,000 req/s",
      },
      { metric: "GET /v1/workloads/{id}, same store", value: row(show), target: "≥ 10,000 req/s" },
      { metric: "GET /healthz, same daemon", value: row(health) },
    ];
    for (const r of table)
      console.log(`  ${r.metric}: ${r.value}${r.target ? ` (target ${r.target})` : ""}`);
    if (list.non2xx > 0 || show.non2xx > 0) throw new Error("non-2xx answers under load");
    console.log(JSON.stringify({ bench: "reads", table }));
  } finally {
    await started.daemon.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  process.exit(0);
}
