/**
 * The Jupyter gateway beside the native exec API, on the built daemon (local backend,
 * bubblewrap, Debian's python3 with IPython):
 *  - execute round trip of `1+1` over the channels websocket (execute_request sent → both
 *    execute_reply and `status: idle` read) against `POST /v1/workloads/{id}/exec` of the
 *    same cell over TCP with the same token. Target: websocket median ≤ 1.5 × native.
 *  - kernel start to idle after READY: `POST /api/kernels`, a websocket opened at once and a
 *    `kernel_info_request` sent while the session is still queued; from the READY
 *    condition's transition to the `kernel_info_reply`. Target ≤ 1000 ms.
 *
 * Run: `node_modules/.bin/bun bench/jupyter.bench.ts [kernels] [execs]`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  condition,
  type Daemon,
  ensureBuilt,
  freePort,
  ms,
  startDaemon,
} from "../test/support/binary-daemon.ts";
import { eventually } from "../test/support/eventually.ts";

interface Summary {
  readonly median: number;
  readonly p90: number;
  readonly min: number;
  readonly max: number;
}

function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  return {
    median: at(0.5),
    p90: at(0.9),
    min: sorted[0] ?? Number.NaN,
    max: sorted.at(-1) ?? Number.NaN,
  };
}

interface Channel {
  /** Sends a request and resolves when its reply and its `idle` have both arrived. */
  request(channel: string, msgType: string, content: object): Promise<Record<string, unknown>>;
  close(): void;
}

async function openChannel(url: string): Promise<Channel> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  const waiting = new Map<
    string,
    {
      reply: Record<string, unknown> | null;
      idle: boolean;
      done: (r: Record<string, unknown>) => void;
    }
  >();
  ws.onmessage = (event) => {
    const m = JSON.parse(String(event.data)) as {
      msg_type: string;
      parent_header: { msg_id?: string };
      content: Record<string, unknown>;
    };
    const w = waiting.get(m.parent_header.msg_id ?? "");
    if (!w) return;
    if (m.msg_type === "status" && m.content["execution_state"] === "idle") w.idle = true;
    else if (m.msg_type.endsWith("_reply")) w.reply = m.content;
    if (w.reply !== null && w.idle) w.done(w.reply);
  };
  return {
    request(channel, msgType, content) {
      const id = crypto.randomUUID();
      return new Promise((done) => {
        waiting.set(id, { reply: null, idle: false, done });
        ws.send(
          JSON.stringify({
            header: {
              msg_id: id,
              msg_type: msgType,
              session: "bench",
              username: "bench",
              date: new Date().toISOString(),
              version: "5.3",
            },
            parent_header: {},
            metadata: {},
            content,
            channel,
          }),
        );
      });
    },
    close: () => ws.close(),
  };
}

export async function benchJupyter(kernels: number, execs: number) {
  ensureBuilt();
  const port = await freePort();
  const d: Daemon = await startDaemon({
    env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
    args: ["--listen", `127.0.0.1:${port}`],
  });
  const token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
  const base = `http://127.0.0.1:${port}`;
  const headers = { Authorization: `token ${token}`, "Content-Type": "application/json" };
  const startToIdle: number[] = [];
  const websocket: number[] = [];
  const native: number[] = [];
  try {
    for (let k = 0; k < kernels; k++) {
      const started = (await (
        await fetch(`${base}/api/kernels`, {
          method: "POST",
          headers,
          body: JSON.stringify({ name: "default" }),
        })
      ).json()) as { id: string };
      const channel = await openChannel(
        `ws://127.0.0.1:${port}/api/kernels/${started.id}/channels?token=${token}`,
      );
      await channel.request("shell", "kernel_info_request", {});
      const repliedAt = Date.now();
      const workloadId = `w-${started.id.slice(2).replaceAll("-", "")}`;
      const ready = condition(await d.show(workloadId), "READY");
      startToIdle.push(repliedAt - ms(ready?.lastTransitionTime));
      if (k === 0) {
        for (let i = 0; i < 10; i++)
          await channel.request("shell", "execute_request", { code: "1+1" });
        for (let i = 0; i < execs; i++) {
          // Alternated, so a slow moment of the machine costs both sides alike.
          const t0 = performance.now();
          await channel.request("shell", "execute_request", {
            code: "1+1",
            silent: false,
            store_history: true,
            user_expressions: {},
            allow_stdin: false,
            stop_on_error: true,
          });
          websocket.push(performance.now() - t0);
          const t1 = performance.now();
          const r = await fetch(`${base}/v1/workloads/${workloadId}/exec`, {
            method: "POST",
            headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
            body: JSON.stringify({ code: "1+1" }),
          });
          await r.json();
          native.push(performance.now() - t1);
        }
      }
      channel.close();
      await fetch(`${base}/api/kernels/${started.id}`, { method: "DELETE", headers });
      await eventually(async () => (await d.show(workloadId)).phase === "CANCELLED", {
        timeoutMs: 20_000,
      });
    }
  } finally {
    await d.stop();
  }
  const ws = summarize(websocket);
  const nat = summarize(native);
  return {
    kernels,
    execs,
    websocketRoundTripMs: ws,
    nativeRoundTripMs: nat,
    ratio: ws.median / nat.median,
    startToIdleAfterReadyMs: summarize(startToIdle),
  };
}

if (import.meta.main) {
  const quick = process.env["O4S_BENCH_QUICK"] === "1";
  const kernels = Number(process.argv[2] ?? (quick ? 1 : 5));
  const execs = Number(process.argv[3] ?? (quick ? 30 : 300));
  const r = await benchJupyter(kernels, execs);
  const f = (s: Summary) =>
    `median ${s.median.toFixed(1)} ms, p90 ${s.p90.toFixed(1)} ms, min ${s.min.toFixed(1)}, max ${s.max.toFixed(1)}`;
  console.log(`jupyter bench (${kernels} kernels, ${execs} execs, local backend)`);
  console.log(`  websocket execute 1+1: ${f(r.websocketRoundTripMs)}`);
  console.log(`  native exec 1+1 (TCP): ${f(r.nativeRoundTripMs)}`);
  console.log(`  ratio of medians:      ${r.ratio.toFixed(2)} (target ≤ 1.5)`);
  console.log(`  READY → kernel_info:   ${f(r.startToIdleAfterReadyMs)} (target ≤ 1000 ms)`);
  console.log(
    JSON.stringify({
      bench: "jupyter",
      table: [
        {
          metric: "websocket execute round trip, median ms",
          value: r.websocketRoundTripMs.median.toFixed(1),
        },
        {
          metric: "native exec round trip, median ms",
          value: r.nativeRoundTripMs.median.toFixed(1),
        },
        { metric: "websocket / native", value: r.ratio.toFixed(2), target: "≤ 1.5" },
        {
          metric: "READY → kernel idle, median ms",
          value: r.startToIdleAfterReadyMs.median.toFixed(0),
          target: "≤ 1000",
        },
      ],
    }),
  );
}
