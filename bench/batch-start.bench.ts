/**
 * A BATCH job's start on the local backend, through the built binary with a root daemon and
 * bubblewrap (each workload's uid leased and its workspace handed to it, issue 18): from the
 * `POST /v1/workloads` leaving the client to the allocation's `startedAt` (the daemon's
 * RUNNING, same machine clock), and to the client seeing it COMPLETED. One job at a time, so
 * each figure is one job's path, not a queue.
 *
 * Side by side with another build: `O4S_BENCH_BINARY=/path/to/openai4s` runs the same jobs
 * against that binary (e.g. main's, built from `git archive`).
 *
 * Run: `node_modules/.bin/bun bench/batch-start.bench.ts [jobs]` (O4S_BENCH_QUICK=1: 5 jobs).
 */
import { type Daemon, ensureBuilt, ms, startDaemon } from "../test/support/binary-daemon.ts";
import { eventually } from "../test/support/eventually.ts";

const quick = process.env["O4S_BENCH_QUICK"] === "1";

interface Summary {
  readonly median: number;
  readonly p90: number;
  readonly min: number;
  readonly max: number;
}

function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { median: at(0.5), p90: at(0.9), min: sorted[0] ?? 0, max: sorted.at(-1) ?? 0 };
}

interface View {
  readonly phase: string;
  readonly allocations: readonly { readonly startedAt: string | number | null }[];
}

async function get(d: Daemon, path: string): Promise<View> {
  const r = await fetch(`http://localhost${path}`, { unix: d.socket });
  return (await r.json()) as View;
}

/** BATCH refused here (a daemon that is not root, without a working sandbox): nothing to time. */
class BatchRefused extends Error {}

async function oneJob(d: Daemon): Promise<{ startMs: number; completedMs: number }> {
  const posted = Date.now();
  const r = await fetch("http://localhost/v1/workloads", {
    unix: d.socket,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ kind: "BATCH", profile: "default", command: ["true"] }),
  });
  if (r.status === 409) throw new BatchRefused(await r.text());
  if (r.status !== 201) throw new Error(`POST answered ${r.status}: ${await r.text()}`);
  const { id } = (await r.json()) as { id: string };
  const done = await eventually(
    async () => {
      const view = await get(d, `/v1/workloads/${id}`);
      return view.phase === "COMPLETED" ? view : null;
    },
    { what: `${id} COMPLETED`, timeoutMs: 30_000, intervalMs: 5 },
  );
  const completedMs = Date.now() - posted;
  return { startMs: ms(done.allocations[0]?.startedAt) - posted, completedMs };
}

export async function benchBatchStart(jobs: number, binary?: string) {
  if (binary === undefined) ensureBuilt();
  const d = await startDaemon({
    env: { PATH: "/usr/local/bin:/usr/bin:/bin" },
    gateway: false,
    ...(binary === undefined ? {} : { binary }),
  });
  try {
    await oneJob(d); // warm-up: the first claim scans the spool, the first bwrap loads
    const starts: number[] = [];
    const completions: number[] = [];
    for (let i = 0; i < jobs; i++) {
      const { startMs, completedMs } = await oneJob(d);
      starts.push(startMs);
      completions.push(completedMs);
    }
    return {
      jobs,
      postToRunningMs: summarize(starts),
      postToCompletedSeenMs: summarize(completions),
    };
  } finally {
    await d.stop();
  }
}

if (import.meta.main) {
  const jobs = Number(process.argv[2] ?? (quick ? 5 : 30));
  const binary = process.env["O4S_BENCH_BINARY"];
  let result: Awaited<ReturnType<typeof benchBatchStart>>;
  try {
    result = await benchBatchStart(jobs, binary === "" ? undefined : binary);
  } catch (error) {
    if (!(error instanceof BatchRefused)) throw error;
    // Printed without a report line: bench/run.ts lists the bench as skipped.
    console.log(`batch-start skipped: BATCH is refused on this machine: ${error.message}`);
    process.exit(0);
  }
  console.log(
    JSON.stringify({
      bench: "batch-start",
      ...(binary ? { binary } : {}),
      table: [
        {
          metric: "BATCH POST → RUNNING (startedAt) median ms",
          value: result.postToRunningMs.median.toFixed(1),
        },
        { metric: "BATCH POST → RUNNING p90 ms", value: result.postToRunningMs.p90.toFixed(1) },
        {
          metric: "BATCH POST → COMPLETED seen median ms",
          value: result.postToCompletedSeenMs.median.toFixed(1),
        },
      ],
      result,
    }),
  );
}
