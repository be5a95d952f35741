/**
 * Sessions as scientists use them on the REAL Slurm test cluster (gated on
 * OPENAI4S_SLURM_TEST_DIR), through the built binary with the worker channel over TLS:
 * output streamed to the CLI as printed, interrupt with state intact, a matplotlib figure as
 * image/png, a kernel death turning KERNEL_RESPONSIVE FALSE without an exec.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BINARY,
  condition,
  type Daemon,
  ensureBuilt,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CLUSTER_TOML = `[profiles.one]
description = "One node for a session"
partition = "debug"
nodes = 1
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = true
`;

async function poll(probe: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  return await eventually(probe, { timeoutMs, intervalMs: 50 }).catch(() => false);
}

describe.skipIf(testCluster === null)("slurm-cluster live sessions", () => {
  const cluster = testCluster as TestCluster;
  let d: Daemon;
  let scratch: string;
  let id = "";

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-slurm-live-");
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, CLUSTER_TOML);
    d = await startDaemon({
      args: ["--backend", "slurm", "--cluster-config", config],
      env: {
        SLURM_CONF: cluster.slurmConf,
        // Debian's python3 (with python3-matplotlib) first, the cluster's commands after.
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}:/usr/sbin:/sbin`,
      },
      startTimeoutMs: 120_000,
    });
    // Verification runs in the background: sessions are admitted once the probe passed.
    await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
      what: "session isolation verified on the nodes",
      timeoutMs: 120_000,
    });
    const started = await d.cli("session", "start", "--profile", "one");
    if (started.code !== 0) throw new Error(`session start: ${started.stderr}\n${d.log()}`);
    id = started.stdout.trim().split(/\s+/).at(-1)!;
    const ready = await d.cli("wait", id, "--until", "READY", "--timeout", "90s");
    if (ready.code !== 0) throw new Error(`not READY: ${ready.stdout}${ready.stderr}\n${d.log()}`);
  }, 180_000);

  afterAll(async () => {
    if (id) {
      await d?.cli("cancel", id);
      await d?.cli("wait", id, "--until", "TERMINAL", "--timeout", "60s");
    }
    await d?.stop();
    if (scratch) removeDir(scratch);
  }, 90_000);

  test("streams a cell's lines to the CLI as they are printed (over TLS)", async () => {
    expect(d.log()).toContain('"worker gateway: TLS"');
    const started = performance.now();
    const p = Bun.spawn(
      [
        BINARY,
        "exec",
        id,
        "import time\nfor i in range(30):\n    print('line', i)\n    time.sleep(0.1)",
      ],
      {
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", OPENAI4S_SERVER: `unix:${d.socket}` },
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const arrivals: number[] = [];
    let text = "";
    for await (const chunk of p.stdout) {
      arrivals.push(performance.now() - started);
      text += new TextDecoder().decode(chunk);
    }
    expect(await p.exited).toBe(0);
    expect(text).toBe(Array.from({ length: 30 }, (_, i) => `line ${i}\n`).join(""));
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThan(1500);
    console.log(`slurm streaming: first line after ${arrivals[0]!.toFixed(0)} ms`);
  }, 60_000);

  test("interrupt stops an endless cell; the kernel keeps its variables", async () => {
    expect((await d.cli("exec", id, "kept = 5")).code).toBe(0);
    const p = Bun.spawn([BINARY, "exec", id, "while True: pass"], {
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", OPENAI4S_SERVER: `unix:${d.socket}` },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(
      await poll(async () => (await d.cli("interrupt", id)).stdout === "interrupted\n", 20_000),
    ).toBe(true);
    expect(await p.exited).toBe(1);
    expect(await new Response(p.stderr).text()).toContain("KeyboardInterrupt");
    expect((await d.cli("exec", id, "kept")).stdout).toBe("5\n");
  }, 60_000);

  test("a matplotlib figure comes back as image/png", async () => {
    const r = await d.cli(
      "exec",
      id,
      "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
      "--json",
    );
    const body = JSON.parse(r.stdout) as {
      outputs: { type: string; data?: Record<string, string> }[];
    };
    const png = body.outputs.find((o) => o.type === "display_data")?.data?.["image/png"];
    expect(
      Buffer.from(png ?? "", "base64")
        .subarray(1, 4)
        .toString(),
    ).toBe("PNG");
  }, 60_000);

  test("os._exit(1) is seen at once; a fresh kernel replaces it and the next exec says so", async () => {
    const armed = await d.cli(
      "exec",
      id,
      "import os, threading\nthreading.Timer(0.3, lambda: os._exit(1)).start()",
    );
    expect(armed.code).toBe(0);
    const diesAt = Date.now() + 300;
    let seenAt = 0;
    expect(
      await poll(async () => {
        const w = await d.show(id);
        const k = condition(w, "KERNEL_RESPONSIVE");
        // Dead for a moment (FALSE KERNEL_DIED), then replaced at once (TRUE
        // KERNEL_RESTARTED): a pass may see either, and both say how it died.
        if (k?.reason !== "KERNEL_DIED" && k?.reason !== "KERNEL_RESTARTED") return false;
        expect(k.message).toContain("exit code 1");
        seenAt = Date.parse(String(k.lastTransitionTime));
        return true;
      }, 15_000),
    ).toBe(true);
    console.log(`slurm liveness: the death seen ${seenAt - diesAt} ms after it`);
    expect(seenAt - diesAt).toBeLessThan(1000);
    const next = JSON.parse((await d.cli("exec", id, "kept", "--json")).stdout);
    expect(next).toMatchObject({ status: "ERROR", kernelRestarted: true });
  }, 60_000);
});
