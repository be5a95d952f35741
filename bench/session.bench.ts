/**
 * Sessions on the local backend, through the built binary with bubblewrap:
 *  - allocation RUNNING → READY: from the allocation's RUNNING event (the reconciler recorded
 *    it) to READY's lastTransitionTime, both stamped by the daemon's clock. Target < 1 s.
 *  - exec round trip: `POST /v1/workloads/{id}/exec` with `1+1` over the unix socket, as a
 *    client sees it (HTTP, activity bookkeeping, gateway, kernel). Target median < 10 ms.
 *  - streaming exec (`?stream=1`, `print(1)`): time to the first `stdout` event, and to the
 *    end of the stream.
 *
 * Run: `node_modules/.bin/bun bench/session.bench.ts [sessions] [execs]`.
 */
import {
  condition,
  type Daemon,
  ensureBuilt,
  ms,
  startDaemon,
  type WorkloadView,
} from "../test/support/binary-daemon.ts";
import { eventually } from "../test/support/eventually.ts";

export interface SessionBenchResult {
  readonly sessions: number;
  readonly runningToReadyMs: Summary;
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
  const submitToReady: number[] = [];
  const exec: number[] = [];
  const streamFirst: number[] = [];
  const streamEnd: number[] = [];
  try {
    for (let i = 0; i < sessionCount; i++) {
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
      if (running && ready) runningToReady.push(ms(ready.lastTransitionTime) - ms(running.at));
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
    submitToReadyMs: summarize(submitToReady),
    execRoundTripMs: summarize(exec),
    streamFirstOutputMs: summarize(streamFirst),
    streamRoundTripMs: summarize(streamEnd),
  };
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
  console.log(`  allocation RUNNING → READY: ${f(result.runningToReadyMs)} (target < 1000 ms)`);
  console.log(`  submit → READY:             ${f(result.submitToReadyMs)}`);
  console.log(`  exec round trip (1+1, API): ${f(result.execRoundTripMs)} (target median < 10 ms)`);
  console.log(`  streaming exec, first output: ${f(result.streamFirstOutputMs)}`);
  console.log(`  streaming exec, whole stream: ${f(result.streamRoundTripMs)}`);
  console.log(JSON.stringify({ bench: "session", ...result }));
}
