/**
 * Issue 30's two speed goals, side by side in one run (local backend, Debian's python3):
 *  - the websocket execute round trip of `1+1` with replay buffering on (the client names its
 *    `session_id`, as every Jupyter client does) on this build, against today's build
 *    (baseline-binary.ts) driven the same way, alternated. Target: median ≤ 1.1 × today's.
 *  - a cell printing 10 MB (`print('x' * 10_000_000)`): from execute_request to the
 *    execute_reply with `idle`, the whole 10 MB having reached the client (the stock server)
 *    or its file in the workspace (openai4s, whose client gets the capped head and tail),
 *    against a stock local Jupyter Server (`jupyter server --ServerApp.token=T ...`) with
 *    ipykernel, its iopub data rate limit off (its default drops the 10 MB). Target: median
 *    ≤ 1.5 × the stock server's.
 *
 * Run: `node_modules/.bin/bun bench/jupyter-stock.bench.ts [execs] [prints]`.
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../test/support/binary-daemon.ts";
import { eventually } from "../test/support/eventually.ts";
import { baselineBinary } from "./baseline-binary.ts";

interface Executed {
  readonly ms: number;
  readonly stdout: string;
  readonly stdoutChars: number;
}

interface Channel {
  execute(code: string): Promise<Executed>;
  close(): void;
}

/** A channels websocket; stdout is kept whole only when `keep` (the 10 MB is counted). */
async function openChannel(url: string): Promise<Channel> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let waiting: {
    id: string;
    reply: boolean;
    idle: boolean;
    text: string[];
    chars: number;
    done: () => void;
  } | null = null;
  ws.onmessage = (event) => {
    const m = JSON.parse(String(event.data)) as {
      msg_type: string;
      parent_header: { msg_id?: string };
      content: { execution_state?: string; text?: string; name?: string };
    };
    const w = waiting;
    if (w === null || m.parent_header.msg_id !== w.id) return;
    if (m.msg_type === "status" && m.content.execution_state === "idle") w.idle = true;
    else if (m.msg_type === "execute_reply") w.reply = true;
    else if (m.msg_type === "stream" && m.content.name === "stdout") {
      w.chars += m.content.text?.length ?? 0;
      if (w.text.length < 64) w.text.push(m.content.text ?? "");
    }
    if (w.reply && w.idle) w.done();
  };
  return {
    execute(code) {
      const id = crypto.randomUUID();
      const t0 = performance.now();
      return new Promise((resolve) => {
        const w = {
          id,
          reply: false,
          idle: false,
          text: [] as string[],
          chars: 0,
          done: () => {
            waiting = null;
            resolve({ ms: performance.now() - t0, stdout: w.text.join(""), stdoutChars: w.chars });
          },
        };
        waiting = w;
        ws.send(
          JSON.stringify({
            header: {
              msg_id: id,
              msg_type: "execute_request",
              session: "bench",
              username: "b",
              version: "5.3",
            },
            parent_header: {},
            metadata: {},
            content: {
              code,
              silent: false,
              store_history: true,
              allow_stdin: false,
              stop_on_error: true,
            },
            channel: "shell",
          }),
        );
      });
    },
    close: () => ws.close(),
  };
}

const median = (values: readonly number[]) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};

interface Side {
  readonly channel: Channel;
  readonly stop: () => Promise<void>;
  /** The whole 10 MB's size as kept: the client's count (stock) or the workspace file's. */
  readonly keptChars: (run: Executed) => number;
}

async function daemonSide(binary: string | undefined): Promise<Side> {
  const port = await freePort();
  const d: Daemon = await startDaemon({
    env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
    args: ["--listen", `127.0.0.1:${port}`],
    ...(binary === undefined ? {} : { binary }),
  });
  const token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
  const started = (await (
    await fetch(`http://127.0.0.1:${port}/api/kernels`, {
      method: "POST",
      headers: { Authorization: `token ${token}`, "Content-Type": "application/json" },
      body: "{}",
    })
  ).json()) as { id: string };
  const session = crypto.randomUUID();
  const channel = await openChannel(
    `ws://127.0.0.1:${port}/api/kernels/${started.id}/channels?token=${token}&session_id=${session}`,
  );
  const workspace = join(
    `${d.stateDir}-spool`,
    "workloads",
    `w-${started.id.slice(2).replaceAll("-", "")}`,
    "workspace",
  );
  return {
    channel,
    stop: async () => {
      channel.close();
      await d.stop();
    },
    keptChars(run) {
      const named = /the whole output goes to (openai4s-outputs\/\S+?\.txt)/.exec(run.stdout)?.[1];
      if (named === undefined) return run.stdoutChars;
      return statSync(join(workspace, named)).size;
    },
  };
}

async function stockSide(): Promise<Side> {
  const port = await freePort();
  const token = crypto.randomUUID();
  const home = (await import("node:fs")).mkdtempSync("/tmp/o4s-bench-stock-");
  const server = Bun.spawn(
    [
      "/usr/bin/python3",
      "-m",
      "jupyter_server",
      `--ServerApp.token=${token}`,
      `--port=${port}`,
      "--no-browser",
      "--allow-root",
      "--ServerApp.ip=127.0.0.1",
      // Its default (1 MB/s) drops a 10 MB print and says "IOPub data rate exceeded": the
      // limit off is how a user of the stock server gets the whole output at all.
      "--ServerApp.iopub_data_rate_limit=10000000000",
    ],
    { env: { PATH: "/usr/bin:/bin", HOME: home }, cwd: home, stdout: "ignore", stderr: "ignore" },
  );
  const base = `http://127.0.0.1:${port}`;
  await eventually(
    async () => {
      try {
        return (await fetch(`${base}/api`)).ok;
      } catch {
        return false;
      }
    },
    { timeoutMs: 30_000 },
  );
  const started = (await (
    await fetch(`${base}/api/kernels`, {
      method: "POST",
      headers: { Authorization: `token ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "python3" }),
    })
  ).json()) as { id: string };
  const channel = await openChannel(
    `ws://127.0.0.1:${port}/api/kernels/${started.id}/channels?token=${token}&session_id=${crypto.randomUUID()}`,
  );
  return {
    channel,
    stop: async () => {
      channel.close();
      server.kill();
      await server.exited;
      (await import("node:fs")).rmSync(home, { recursive: true, force: true });
    },
    keptChars: (run) => run.stdoutChars,
  };
}

export async function benchJupyterStock(execs: number, prints: number) {
  ensureBuilt();
  const baseline = baselineBinary();
  const sides: Side[] = [];
  try {
    const today = await daemonSide(baseline.binary);
    sides.push(today);
    const replay = await daemonSide(undefined);
    sides.push(replay);
    const stock = await stockSide();
    sides.push(stock);
    for (const s of sides) for (let i = 0; i < 5; i++) await s.channel.execute("1+1");
    const todayMs: number[] = [];
    const replayMs: number[] = [];
    for (let i = 0; i < execs; i++) {
      // Alternated, so a slow moment of the machine costs both sides alike.
      todayMs.push((await today.channel.execute("1+1")).ms);
      replayMs.push((await replay.channel.execute("1+1")).ms);
    }
    const big = "print('x' * 10_000_000)";
    const whole = 10_000_001;
    const printOurs: number[] = [];
    const printStock: number[] = [];
    for (let i = 0; i < prints; i++) {
      const ours = await replay.channel.execute(big);
      if (replay.keptChars(ours) !== whole)
        throw new Error(`openai4s kept ${replay.keptChars(ours)}`);
      printOurs.push(ours.ms);
      const theirs = await stock.channel.execute(big);
      if (stock.keptChars(theirs) !== whole) throw new Error(`stock got ${theirs.stdoutChars}`);
      printStock.push(theirs.ms);
    }
    return {
      baseline: baseline.ref,
      roundTrip: { todayMs: median(todayMs), replayMs: median(replayMs) },
      print10Mb: { oursMs: median(printOurs), stockMs: median(printStock) },
    };
  } finally {
    for (const s of sides) await s.stop();
    baseline.dispose();
  }
}

if (import.meta.main) {
  const quick = process.env["O4S_BENCH_QUICK"] === "1";
  const execs = Number(process.argv[2] ?? (quick ? 30 : 300));
  const prints = Number(process.argv[3] ?? (quick ? 1 : 5));
  const r = await benchJupyterStock(execs, prints);
  const rt = r.roundTrip.replayMs / r.roundTrip.todayMs;
  const pr = r.print10Mb.oursMs / r.print10Mb.stockMs;
  const met = (ok: boolean) => (ok ? "met" : "NOT met");
  console.log(`jupyter vs today's build (${r.baseline}) and a stock Jupyter Server`);
  console.log(
    `  execute 1+1, median: today ${r.roundTrip.todayMs.toFixed(2)} ms, with replay ${r.roundTrip.replayMs.toFixed(2)} ms: ${rt.toFixed(2)}× (target ≤ 1.1: ${met(rt <= 1.1)})`,
  );
  console.log(
    `  10 MB print, median: openai4s ${r.print10Mb.oursMs.toFixed(0)} ms, stock ${r.print10Mb.stockMs.toFixed(0)} ms: ${pr.toFixed(2)}× (target ≤ 1.5: ${met(pr <= 1.5)})`,
  );
  console.log(
    JSON.stringify({
      bench: "jupyter-stock",
      table: [
        {
          metric: "execute round trip, today's build, median ms",
          value: r.roundTrip.todayMs.toFixed(2),
        },
        {
          metric: "execute round trip with replay on, median ms",
          value: r.roundTrip.replayMs.toFixed(2),
        },
        {
          metric: "replay on / today's",
          value: rt.toFixed(2),
          target: `≤ 1.1 (${met(rt <= 1.1)})`,
        },
        {
          metric: "10 MB print to reply, openai4s, median ms",
          value: r.print10Mb.oursMs.toFixed(0),
        },
        {
          metric: "10 MB print to reply, stock Jupyter Server, median ms",
          value: r.print10Mb.stockMs.toFixed(0),
        },
        { metric: "openai4s / stock", value: pr.toFixed(2), target: `≤ 1.5 (${met(pr <= 1.5)})` },
      ],
    }),
  );
}
