/**
 * What a principal's token costs on the hottest read: `GET /v1/workloads/{id}` with the
 * admin token (today's path: one constant-time compare) beside the same request with a
 * principal's token (a token row by id, a sha256, and the owner check), on one daemon over
 * loopback TCP, in alternating rounds so both see the same machine. Target: the principal's
 * throughput within 5 % of the admin's. The load runs in a child process (32 connections
 * of keep-alive fetch), so the daemon's share of the CPU is what is compared.
 *
 * Run: `node_modules/.bin/bun bench/principal-auth.bench.ts` (O4S_BENCH_QUICK=1: shorter).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon } from "../src/apps/daemon/daemon.ts";
import { stateLayout } from "../src/core/layout.ts";
import { systemClock } from "../src/lib/clock.ts";
import { jsonLog } from "../src/lib/log.ts";

const quick = process.env["O4S_BENCH_QUICK"] === "1";
const CONNECTIONS = 32;

/** Child mode: hammer `url` for `ms` with CONNECTIONS loops; print requests done. */
async function load(url: string, token: string, ms: number): Promise<void> {
  const end = performance.now() + ms;
  let done = 0;
  let bad = 0;
  const headers = { authorization: `Bearer ${token}` };
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const r = await fetch(url, { headers });
        await r.arrayBuffer();
        if (r.status === 200) done += 1;
        else bad += 1;
      }
    }),
  );
  console.log(JSON.stringify({ done, bad }));
}

async function round(url: string, token: string, ms: number): Promise<number> {
  const child = Bun.spawn([process.execPath, import.meta.path, "--load", url, token, String(ms)], {
    stdout: "pipe",
    stderr: "inherit",
  });
  const out = await new Response(child.stdout).text();
  await child.exited;
  const { done, bad } = JSON.parse(out) as { done: number; bad: number };
  if (bad > 0) throw new Error(`${bad} non-200 answers`);
  return (done * 1000) / ms;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "o4s-bench-auth-"));
  const stateDir = join(dir, "state");
  const started = await startDaemon({
    stateDir,
    listen: [{ kind: "tcp", host: "127.0.0.1", port: 0 }],
    backend: "local",
    clusterConfigPath: null,
    version: "bench",
    env: process.env,
    selfCommand: [process.execPath, join(import.meta.dir, "../src/main.ts")],
    clock: systemClock,
    log: jsonLog(() => {}, { level: "error" }),
    allowUnsandboxedBatch: true,
  });
  if (started.kind !== "Started") throw new Error(`daemon: ${started.kind}: ${started.message}`);
  const base = `http://${started.daemon.listening[0]}`;
  const admin = readFileSync(stateLayout(stateDir).adminToken, "utf8").trim();
  const call = async (path: string, token: string, body?: unknown) => {
    const r = await fetch(`${base}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, string>;
  };
  try {
    await call("/v1/principals", admin, { name: "bench" });
    const principal = (await call("/v1/principals/bench/tokens", admin, {}))["token"] ?? "";
    // A workload the principal owns: the one both tokens read.
    const w = await call("/v1/workloads", principal, {
      kind: "BATCH",
      profile: "default",
      command: ["true"],
    });
    const url = `${base}/v1/workloads/${w["id"]}`;
    const ms = quick ? 1000 : 5000;
    const rounds = quick ? 2 : 5;
    const adminRates: number[] = [];
    const principalRates: number[] = [];
    await round(url, admin, 500); // warm-up
    for (let i = 0; i < rounds; i++) {
      adminRates.push(await round(url, admin, ms));
      principalRates.push(await round(url, principal, ms));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    const a = median(adminRates);
    const p = median(principalRates);
    const ratio = p / a;
    const fmt = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(", ");
    console.log(`  admin token:     median ${a.toFixed(0)} req/s (rounds ${fmt(adminRates)})`);
    console.log(`  principal token: median ${p.toFixed(0)} req/s (rounds ${fmt(principalRates)})`);
    console.log(`  principal/admin: ${(ratio * 100).toFixed(1)} % (target ≥ 95 %)`);
    console.log(
      JSON.stringify({
        bench: "principal-auth",
        table: [
          { metric: "GET /v1/workloads/{id}, admin token", value: `${a.toFixed(0)} req/s` },
          { metric: "same, principal token", value: `${p.toFixed(0)} req/s` },
          { metric: "principal / admin", value: `${(ratio * 100).toFixed(1)} %`, target: "≥ 95 %" },
        ],
      }),
    );
  } finally {
    await started.daemon.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  if (process.argv[2] === "--load") {
    await load(process.argv[3] ?? "", process.argv[4] ?? "", Number(process.argv[5]));
  } else {
    await main();
  }
  process.exit(0);
}
