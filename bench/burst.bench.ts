/**
 * A burst of submissions through the built binary on the local backend (issue 34): N
 * `POST /v1/workloads` sent at once against the time 10 sent one after another take, on
 * the same daemon in the same run (the baseline), repeated; then every workload of the
 * burst is waited for and must have COMPLETED with exactly one allocation (each run once).
 * Target: the burst of 100 all answered within 3x the 10 sequential.
 *
 * Run: `node_modules/.bin/bun bench/burst.bench.ts [burst] [rounds]`
 * (O4S_BENCH_QUICK=1: a burst of 20, one round).
 */
import { type Daemon, ensureBuilt, startDaemon } from "../test/support/binary-daemon.ts";
import { eventually } from "../test/support/eventually.ts";

const quick = process.env["O4S_BENCH_QUICK"] === "1";
const TARGET_RATIO = 3;

async function post(d: Daemon): Promise<{ id: string; ms: number }> {
  const t0 = performance.now();
  const r = await fetch("http://localhost/v1/workloads", {
    unix: d.socket,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ kind: "BATCH", profile: "default", command: ["/bin/true"] }),
  });
  const body = (await r.json()) as { id?: string };
  if (r.status !== 201 || body.id === undefined) {
    throw new Error(`POST answered ${r.status}: ${JSON.stringify(body)}`);
  }
  return { id: body.id, ms: performance.now() - t0 };
}

interface Round {
  readonly sequential10Ms: number;
  readonly burstMs: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly ids: readonly string[];
}

async function round(d: Daemon, burst: number): Promise<Round> {
  const s0 = performance.now();
  for (let i = 0; i < 10; i++) await post(d);
  const sequential10Ms = performance.now() - s0;
  const b0 = performance.now();
  const answers = await Promise.all(Array.from({ length: burst }, () => post(d)));
  const burstMs = performance.now() - b0;
  const sorted = answers.map((a) => a.ms).sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return {
    sequential10Ms,
    burstMs,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    ids: answers.map((a) => a.id),
  };
}

/** Every workload of the burst COMPLETED with one allocation: none lost, none run twice. */
async function ranOnce(d: Daemon, ids: readonly string[]): Promise<string | null> {
  const verdict = await eventually(
    async () => {
      for (const id of ids) {
        const r = await fetch(`http://localhost/v1/workloads/${id}`, { unix: d.socket });
        const view = (await r.json()) as { phase: string; allocations: unknown[] };
        if (view.phase === "FAILED" || view.phase === "LOST") return `${id} ended ${view.phase}`;
        if (view.phase !== "COMPLETED") return null;
        if (view.allocations.length !== 1) return `${id} has ${view.allocations.length} attempts`;
      }
      return "ok";
    },
    { what: "the burst COMPLETED", timeoutMs: 120_000, intervalMs: 200 },
  );
  return verdict === "ok" ? null : verdict;
}

if (import.meta.main) {
  const burst = Number(process.argv[2] ?? (quick ? 20 : 100));
  const rounds = Number(process.argv[3] ?? (quick ? 1 : 3));
  ensureBuilt();
  const d = await startDaemon({ env: { PATH: "/usr/local/bin:/usr/bin:/bin" }, gateway: false });
  try {
    await post(d); // warm-up: the first claim scans the spool
    const results: Round[] = [];
    const problems: string[] = [];
    for (let i = 0; i < rounds; i++) {
      const r = await round(d, burst);
      results.push(r);
      const problem = await ranOnce(d, r.ids);
      if (problem !== null) problems.push(problem);
    }
    const ratios = results.map((r) => r.burstMs / r.sequential10Ms);
    const worst = Math.max(...ratios);
    const table = [
      ...results.flatMap((r, i) => [
        {
          metric: `round ${i + 1}: 10 sequential POSTs ms (baseline)`,
          value: r.sequential10Ms.toFixed(0),
        },
        {
          metric: `round ${i + 1}: ${burst} concurrent POSTs, all answered ms (p50 / p99)`,
          value: `${r.burstMs.toFixed(0)} (${r.p50Ms.toFixed(0)} / ${r.p99Ms.toFixed(0)})`,
        },
      ]),
      {
        metric: `${burst} concurrent / 10 sequential, range over ${rounds} rounds`,
        value: `${Math.min(...ratios).toFixed(2)}-${worst.toFixed(2)}x`,
        target: `<= ${TARGET_RATIO}x: ${worst <= TARGET_RATIO ? "met" : "NOT met"}`,
      },
      {
        metric: "every workload of each burst COMPLETED, one allocation each",
        value: problems.length === 0 ? "yes" : problems.join("; "),
        target: `exactly once: ${problems.length === 0 ? "met" : "NOT met"}`,
      },
    ];
    console.log(JSON.stringify({ bench: "burst", burst, rounds, table, ratios }));
  } finally {
    await d.stop();
  }
}
