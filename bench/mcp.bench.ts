/**
 * The MCP door's cost (issue 31), through the built binary on the local backend:
 *  1. run_code of `1+1` over MCP (Streamable HTTP, the SDK's client) against the native
 *     exec API's round trip (POST /v1/workloads/{id}/exec) on the same session and
 *     listener. Target: MCP median ≤ 1.5 × native median.
 *  2. 20 agents (each its own MCP session) running 10 cells each, all at once, on 5
 *     sessions (4 agents share a kernel: 20 Python kernels do not fit this bench machine
 *     beside the others). Target: no error, the daemon's resident memory after ≤ before +
 *     100 MiB.
 *
 * Run: `node_modules/.bin/bun bench/mcp.bench.ts` (`O4S_BENCH_QUICK=1`: fewer calls, 4 agents).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../test/support/binary-daemon.ts";

const QUICK = process.env["O4S_BENCH_QUICK"] === "1";
const CALLS = QUICK ? 30 : 200;
const AGENTS = QUICK ? 4 : 20;
const CELLS = QUICK ? 3 : 10;
const SESSIONS = QUICK ? 2 : 5;
const RATIO_TARGET = 1.5;
const MEMORY_GROWTH_TARGET_MIB = 100;

function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"));
  return Number(/([0-9]+)/.exec(line ?? "")?.[1] ?? "0") / 1024;
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function startSession(base: string, token: string, profile: string): Promise<string> {
  const auth = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
  const created = await fetch(`${base}/v1/workloads`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ kind: "SESSION", profile }),
  });
  const id = ((await created.json()) as { id: string }).id;
  for (let i = 0; i < 600; i++) {
    const w = (await (await fetch(`${base}/v1/workloads/${id}`, { headers: auth })).json()) as {
      phase: string;
      conditions: { type: string; status: string }[];
    };
    if (w.conditions.some((c) => c.type === "READY" && c.status === "TRUE")) return id;
    if (["FAILED", "CANCELLED", "LOST"].includes(w.phase))
      throw new Error(`session ${id} ${w.phase}`);
    await Bun.sleep(200);
  }
  throw new Error(`session ${id} not READY`);
}

async function mcpClient(base: string, token: string): Promise<Client> {
  const client = new Client({ name: "bench-agent", version: "1" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

async function runCode(client: Client, session: string, code: string): Promise<string> {
  const r = (await client.callTool({ name: "run_code", arguments: { session, code } })) as {
    isError?: boolean;
    content: { type: string; text?: string }[];
  };
  const text = r.content.map((c) => c.text ?? "").join("");
  if (r.isError === true) throw new Error(`run_code failed: ${text}`);
  return text;
}

export async function benchMcp() {
  ensureBuilt();
  const port = await freePort();
  let d: Daemon | null = null;
  try {
    d = await startDaemon({
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    const base = `http://127.0.0.1:${port}`;
    const token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
    const listed = (await (
      await fetch(`${base}/v1/profiles`, { headers: { Authorization: `Bearer ${token}` } })
    ).json()) as {
      profiles: { name: string; kinds: string[] }[];
    };
    const profile = listed.profiles.find((p) => p.kinds.includes("SESSION"))?.name ?? "";
    const sessions = await Promise.all(
      Array.from({ length: SESSIONS }, () => startSession(base, token, profile)),
    );
    const session = sessions[0] as string;

    // 1. One cell at a time, alternating doors so both see the same machine load.
    const client = await mcpClient(base, token);
    const native: number[] = [];
    const mcp: number[] = [];
    const execNative = async () => {
      const r = await fetch(`${base}/v1/workloads/${session}/exec`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify({ code: "1+1" }),
      });
      const body = (await r.json()) as { output: string };
      if (!body.output.includes("2"))
        throw new Error(`native exec answered ${JSON.stringify(body)}`);
    };
    for (let i = 0; i < 10; i++) {
      await execNative();
      await runCode(client, session, "1+1");
    }
    for (let i = 0; i < CALLS; i++) {
      let t = performance.now();
      await execNative();
      native.push(performance.now() - t);
      t = performance.now();
      const text = await runCode(client, session, "1+1");
      mcp.push(performance.now() - t);
      if (!text.includes("2")) throw new Error(`run_code answered ${text}`);
    }
    await client.close();

    // 2. Agents at once.
    const pid = d.proc.pid;
    const before = rssMiB(pid);
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMiB(pid));
    }, 100);
    const errors: string[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: AGENTS }, async (_, agent) => {
        try {
          const c = await mcpClient(base, token);
          const target = sessions[agent % sessions.length] as string;
          for (let cell = 0; cell < CELLS; cell++) {
            const text = await runCode(c, target, `${agent} * 1000 + ${cell}`);
            if (!text.includes(String(agent * 1000 + cell)))
              errors.push(`agent ${agent} cell ${cell}: ${text}`);
          }
          await c.close();
        } catch (error) {
          errors.push(`agent ${agent}: ${String(error)}`);
        }
      }),
    );
    const concurrentMs = performance.now() - started;
    clearInterval(sampler);
    const after = rssMiB(pid);
    const ratio = median(mcp) / median(native);
    return {
      calls: CALLS,
      nativeMedianMs: median(native),
      mcpMedianMs: median(mcp),
      ratio,
      ratioMet: ratio <= RATIO_TARGET,
      agents: AGENTS,
      cellsPerAgent: CELLS,
      sessions: SESSIONS,
      concurrentMs,
      errors: errors.length,
      firstError: errors[0] ?? null,
      rssBeforeMiB: before,
      rssPeakMiB: peak,
      rssAfterMiB: after,
      memoryMet: after - before <= MEMORY_GROWTH_TARGET_MIB,
    };
  } finally {
    await d?.stop();
  }
}

if (import.meta.main) {
  const r = await benchMcp();
  const f = (n: number) => n.toFixed(2);
  console.log(
    `mcp bench (${r.calls} calls of 1+1 each way; ${r.agents} agents × ${r.cellsPerAgent} cells on ${r.sessions} sessions)`,
  );
  console.log(
    `  native exec median ${f(r.nativeMedianMs)} ms, MCP run_code median ${f(r.mcpMedianMs)} ms: ratio ${f(r.ratio)} (target ≤ ${RATIO_TARGET}): ${r.ratioMet ? "met" : "NOT met"}`,
  );
  console.log(
    `  agents: ${f(r.concurrentMs)} ms, ${r.errors} errors${r.firstError ? ` (first: ${r.firstError})` : ""}; daemon RSS ${f(r.rssBeforeMiB)} → peak ${f(r.rssPeakMiB)} → ${f(r.rssAfterMiB)} MiB (target growth ≤ ${MEMORY_GROWTH_TARGET_MIB} MiB, no error): ${r.memoryMet && r.errors === 0 ? "met" : "NOT met"}`,
  );
  console.log(
    JSON.stringify({
      bench: "mcp",
      table: [
        {
          metric: "run_code 1+1 MCP/native median ratio",
          value: f(r.ratio),
          target: `≤ ${RATIO_TARGET}`,
        },
        { metric: "native exec median ms", value: f(r.nativeMedianMs) },
        { metric: "MCP run_code median ms", value: f(r.mcpMedianMs) },
        {
          metric: `${r.agents}×${r.cellsPerAgent} agents errors`,
          value: String(r.errors),
          target: "0",
        },
        {
          metric: "daemon RSS growth MiB",
          value: f(r.rssAfterMiB - r.rssBeforeMiB),
          target: `≤ ${MEMORY_GROWTH_TARGET_MIB}`,
        },
      ],
    }),
  );
}
