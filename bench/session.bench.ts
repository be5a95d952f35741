/**
 * Sessions on the local backend, through the built binary with bubblewrap:
 *  - allocation RUNNING → READY: from the allocation's RUNNING event (the reconciler recorded
 *    it) to READY's lastTransitionTime, both stamped by the daemon's clock. Target < 1 s
 *    median: met on a quiet machine (358 ms median, 6 sessions, load 0.7), not under load
 *    (2.7 s at load 20, 4.4 s at 18; issue 34 saw 4.2 s). Nearly all of it is the kernel's
 *    own start, python3 and, where IPython is installed, IPython's import: about 0.8 s of CPU
 *    here, so it stretches with the machine's load. The bench measures that beside each
 *    session as a baseline (the same python3 and sources, spawned bare: no sandbox, worker
 *    or daemon; 2.5 s median at load 20) and prints what is left beyond it (the sandbox, the
 *    worker's start and dial, the probes, the writes: 0.3 s median at load 20). Nothing in
 *    it is a poll: a worker's connection and each probe's answer trigger the readiness pass
 *    (core/session/readiness.ts). The stages are printed from the conditions' own times;
 *    the workspace and kernel probes run together, so the kernel's start shows in the first.
 *  - exec round trip: `POST /v1/workloads/{id}/exec` with `1+1` over the unix socket, as a
 *    client sees it (HTTP, activity bookkeeping, gateway, kernel). Target median < 10 ms.
 *  - streaming exec (`?stream=1`, `print(1)`): time to the first `stdout` event, and to the
 *    end of the stream.
 *
 * Run: `node_modules/.bin/bun bench/session.bench.ts [sessions] [execs]`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  condition,
  type Daemon,
  ensureBuilt,
  ms,
  startDaemon,
  type WorkloadView,
} from "../test/support/binary-daemon.ts";
import { eventually } from "../test/support/eventually.ts";

/** The readiness conditions in the order they turn TRUE, READY last. */
const STAGES = ["WORKER_CONNECTED", "WORKSPACE_VISIBLE", "KERNEL_RESPONSIVE", "READY"] as const;

export interface SessionBenchResult {
  readonly sessions: number;
  readonly runningToReadyMs: Summary;
  /**
   * Where RUNNING → READY goes, each stage from the one before (the conditions' own
   * lastTransitionTime, daemon clock): the worker's start in its sandbox and its dial back,
   * the workspace probe, the kernel's start and `1+1`, and READY's write after the last.
   */
  readonly stagesMs: Readonly<Record<(typeof STAGES)[number], Summary>>;
  /**
   * The baseline taken beside each session, in the same run: the kernel alone (the same
   * python3 and sources the worker runs, no sandbox, no worker, no daemon) from its spawn to
   * its answer to `1+1`. Python's start and, where IPython is installed, IPython's import.
   */
  readonly bareKernelMs: Summary;
  /** RUNNING → READY less the same round's bare kernel: the sandbox, worker, probes, writes. */
  readonly beyondKernelMs: Summary;
  readonly submitToReadyMs: Summary;
  readonly execRoundTripMs: Summary;
  /** Streaming exec of `print(1)`: request sent → first `stdout` event read. */
  readonly streamFirstOutputMs: Summary;
  /** Streaming exec of `print(1)`: request sent → stream ended (after `result`). */
  readonly streamRoundTripMs: Summary;
}

interface Summary {
  readonly median: number;
  readonly p90: number;
  readonly max: number;
  readonly min: number;
}

function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return {
    median: at(0.5),
    p90: at(0.9),
    max: sorted.at(-1) ?? NaN,
    min: sorted[0] ?? NaN,
  };
}

async function api(d: Daemon, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`http://localhost${path}`, {
    method,
    unix: d.socket,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function workload(d: Daemon, id: string): Promise<WorkloadView> {
  return (await (await api(d, "GET", `/v1/workloads/${id}`)).json()) as WorkloadView;
}

export async function benchSessions(
  sessionCount = 10,
  execCount = 300,
): Promise<SessionBenchResult> {
  ensureBuilt();
  const d = await startDaemon({});
  const runningToReady: number[] = [];
  const bareKernel: number[] = [];
  const beyondKernel: number[] = [];
  const stages = Object.fromEntries(STAGES.map((t) => [t, [] as number[]])) as Record<
    (typeof STAGES)[number],
    number[]
  >;
  const submitToReady: number[] = [];
  const exec: number[] = [];
  const streamFirst: number[] = [];
  const streamEnd: number[] = [];
  try {
    for (let i = 0; i < sessionCount; i++) {
      const bare = await bareKernelStart();
      bareKernel.push(bare);
      const t0 = performance.now();
      const created = await api(d, "POST", "/v1/workloads", {
        kind: "SESSION",
        profile: "default",
      });
      if (created.status !== 201)
        throw new Error(`create: ${created.status} ${await created.text()}`);
      const { id } = (await created.json()) as { id: string };
      const w = await eventually(
        async () => {
          const v = await workload(d, id);
          return condition(v, "READY")?.status === "TRUE" ? v : null;
        },
        { what: `session ${id} READY`, timeoutMs: 30_000, intervalMs: 5 },
      );
      submitToReady.push(performance.now() - t0);
      // The events route answers a bare array (it once was `{ events }`: this line broke).
      const list = (await (await api(d, "GET", `/v1/workloads/${id}/events`)).json()) as {
        at: string | number;
        phase: string;
      }[];
      const running = list.find((e) => e.phase === "RUNNING");
      const ready = condition(w, "READY");
      if (running && ready) {
        runningToReady.push(ms(ready.lastTransitionTime) - ms(running.at));
        beyondKernel.push(ms(ready.lastTransitionTime) - ms(running.at) - bare);
        let previous = ms(running.at);
        for (const type of STAGES) {
          const at = ms(condition(w, type)?.lastTransitionTime);
          stages[type].push(at - previous);
          previous = at;
        }
      }
      if (i === 0) {
        for (let j = 0; j < 20; j++)
          await api(d, "POST", `/v1/workloads/${id}/exec`, { code: "1+1" });
        for (let j = 0; j < execCount; j++) {
          const s = performance.now();
          const r = await api(d, "POST", `/v1/workloads/${id}/exec`, { code: "1+1" });
          await r.arrayBuffer();
          if (r.status !== 200) throw new Error(`exec: ${r.status}`);
          exec.push(performance.now() - s);
        }
        for (let j = 0; j < execCount; j++) {
          const [first, end] = await streamOnce(d, id);
          streamFirst.push(first);
          streamEnd.push(end);
        }
      }
      await api(d, "POST", `/v1/workloads/${id}/cancel`);
    }
  } finally {
    await d.stop();
  }
  return {
    sessions: sessionCount,
    runningToReadyMs: summarize(runningToReady),
    stagesMs: Object.fromEntries(STAGES.map((t) => [t, summarize(stages[t])])) as Record<
      (typeof STAGES)[number],
      Summary
    >,
    bareKernelMs: summarize(bareKernel),
    beyondKernelMs: summarize(beyondKernel),
    submitToReadyMs: summarize(submitToReady),
    execRoundTripMs: summarize(exec),
    streamFirstOutputMs: summarize(streamFirst),
    streamRoundTripMs: summarize(streamEnd),
  };
}

/**
 * The kernel as the worker starts it (kernel-launch.ts: `python3 -u -c kernel.py MAX_CHARS
 * MAX_MIME_CHARS kernel-jupyter.py`), with python3 looked up on the sandbox's PATH, timed from
 * spawn to its reply to `1+1`.
 */
async function bareKernelStart(): Promise<number> {
  const python = Bun.which("python3", { PATH: "/usr/local/bin:/usr/bin:/bin" }) ?? "python3";
  const dir = join(import.meta.dir, "../src/apps/worker");
  const kernel = readFileSync(join(dir, "kernel.py"), "utf8");
  const jupyter = readFileSync(join(dir, "kernel-jupyter.py"), "utf8");
  const started = performance.now();
  const child = Bun.spawn([python, "-u", "-c", kernel, "200000", "524288", jupyter], {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "ignore",
  });
  child.stdin.write('{"id": 1, "code": "1+1"}\n');
  await child.stdin.flush();
  let text = "";
  const decoder = new TextDecoder();
  for await (const chunk of child.stdout) {
    text += decoder.decode(chunk, { stream: true });
    if (text.includes('"reply"')) break;
  }
  const elapsed = performance.now() - started;
  await child.stdin.end();
  child.kill();
  await child.exited;
  if (!text.includes('"text/plain": "2"')) throw new Error(`bare kernel: ${text}`);
  return elapsed;
}

/** One streaming exec: [ms to the first stdout event, ms to the end of the stream]. */
async function streamOnce(d: Daemon, id: string): Promise<[number, number]> {
  const s = performance.now();
  const r = await fetch(`http://localhost/v1/workloads/${id}/exec?stream=1`, {
    method: "POST",
    unix: d.socket,
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ code: "print(1)" }),
  });
  if (r.status !== 200 || !r.body) throw new Error(`stream exec: ${r.status}`);
  let first = Number.NaN;
  let text = "";
  const decoder = new TextDecoder();
  for await (const chunk of r.body) {
    text += decoder.decode(chunk, { stream: true });
    if (Number.isNaN(first) && text.includes("event: stdout")) first = performance.now() - s;
  }
  if (!text.includes("event: result")) throw new Error(`stream exec without a result: ${text}`);
  return [first, performance.now() - s];
}

if (import.meta.main) {
  const quick = process.env["O4S_BENCH_QUICK"] === "1";
  const sessions = Number(process.argv[2] ?? (quick ? 2 : 10));
  const execs = Number(process.argv[3] ?? (quick ? 50 : 300));
  const result = await benchSessions(sessions, execs);
  const f = (s: Summary) =>
    `median ${s.median.toFixed(1)} ms, p90 ${s.p90.toFixed(1)} ms, min ${s.min.toFixed(1)}, max ${s.max.toFixed(1)}`;
  console.log(`session bench (${result.sessions} sessions, local backend, bubblewrap)`);
  const met = result.runningToReadyMs.median < 1000 ? "met" : "NOT met";
  console.log(
    `  allocation RUNNING → READY: ${f(result.runningToReadyMs)} (target median < 1000 ms: ${met})`,
  );
  for (const type of STAGES) console.log(`    … then ${type}: ${f(result.stagesMs[type])}`);
  if (met !== "met") {
    const share = result.bareKernelMs.median / result.runningToReadyMs.median;
    console.log(
      `  why: the bare kernel alone took ${result.bareKernelMs.median.toFixed(0)} ms median in this run (${(share * 100).toFixed(0)} % of RUNNING → READY)`,
    );
  }
  console.log(`  baseline, the bare kernel's start to 1+1: ${f(result.bareKernelMs)}`);
  console.log(`  RUNNING → READY less the bare kernel:      ${f(result.beyondKernelMs)}`);
  console.log(`  submit → READY:             ${f(result.submitToReadyMs)}`);
  console.log(`  exec round trip (1+1, API): ${f(result.execRoundTripMs)} (target median < 10 ms)`);
  console.log(`  streaming exec, first output: ${f(result.streamFirstOutputMs)}`);
  console.log(`  streaming exec, whole stream: ${f(result.streamRoundTripMs)}`);
  const median = (s: Summary) => `${s.median.toFixed(0)} ms median (p90 ${s.p90.toFixed(0)})`;
  const execMet = result.execRoundTripMs.median < 10 ? "met" : "NOT met";
  // The runner's table: each figure with its target and whether it is met; the whole result
  // stays in `result` for whoever wants the stages.
  const table = [
    {
      metric: "allocation RUNNING → READY",
      value: median(result.runningToReadyMs),
      target: `< 1000 ms: ${met}${met === "met" ? "" : ` (the bare kernel alone: ${result.bareKernelMs.median.toFixed(0)} ms)`}`,
    },
    { metric: "baseline: the bare kernel's start to 1+1", value: median(result.bareKernelMs) },
    { metric: "RUNNING → READY less the bare kernel", value: median(result.beyondKernelMs) },
    { metric: "submit → READY", value: median(result.submitToReadyMs) },
    {
      metric: "exec round trip (1+1, API)",
      value: median(result.execRoundTripMs),
      target: `< 10 ms: ${execMet}`,
    },
    { metric: "streaming exec, first output", value: median(result.streamFirstOutputMs) },
  ];
  console.log(JSON.stringify({ bench: "session", table, result }));
}
