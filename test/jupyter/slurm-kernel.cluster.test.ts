/**
 * A Jupyter kernel on the REAL Slurm dev cluster (gated on OPENAI4S_SLURM_TEST_DIR): the
 * built daemon with `--backend slurm` and a 2-node session profile, driven by JupyterLab's
 * client library. The kernel is rank 0 of its gang (it answers only once both ranks are
 * connected: READY), keeps state across cells and draws a figure.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KernelManager, type KernelMessage, ServerConnection } from "@jupyterlab/services";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CLUSTER_TOML = `[profiles.pair]
description = "Two nodes for a Jupyter kernel's gang"
partition = "debug"
nodes = 2
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = false
`;

describe.skipIf(testCluster === null)("a Jupyter kernel on the Slurm cluster", () => {
  const cluster = testCluster as TestCluster;
  let d: Daemon;
  let scratch: string;
  let port: number;

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-slurm-jupyter-");
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, CLUSTER_TOML);
    port = await freePort();
    d = await startDaemon({
      args: ["--backend", "slurm", "--cluster-config", config, "--listen", `127.0.0.1:${port}`],
      env: {
        SLURM_CONF: cluster.slurmConf,
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}:/usr/sbin:/sbin`,
      },
      startTimeoutMs: 120_000,
    });
    await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
      what: "session isolation verified on the nodes",
      timeoutMs: 120_000,
    });
  }, 240_000);

  afterAll(async () => {
    await d?.stop();
    if (scratch) removeDir(scratch);
  }, 60_000);

  test("a kernel on the 2-node profile runs as rank 0 of its gang, keeps state and draws a figure", async () => {
    const token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
    const settings = ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${port}/`,
      wsUrl: `ws://127.0.0.1:${port}/`,
      token,
      appendToken: true,
    });
    const kernels = new KernelManager({ serverSettings: settings });
    const kernel = await kernels.startNew({ name: "pair" });
    try {
      const run = async (code: string) => {
        const iopub: KernelMessage.IIOPubMessage[] = [];
        const future = kernel.requestExecute({ code });
        future.onIOPub = (msg) => {
          iopub.push(msg);
        };
        const reply = await future.done;
        expect(reply.content.status).toBe("ok");
        return iopub;
      };
      await run("x = 20");
      const ranks = await run("import os\nprint('rank', os.environ.get('SLURM_PROCID'))");
      const text = ranks
        .filter((m) => m.header.msg_type === "stream")
        .map((m) => (m.content as { text: string }).text)
        .join("");
      // The kernel is rank 0 of the gang; READY (which the first cell waited for) needs both
      // ranks connected, so the 2-node allocation is whole when it runs.
      expect(text).toBe("rank 0\n");
      const figure = await run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nx * 2 + 2");
      const result = figure.find((m) => m.header.msg_type === "execute_result");
      expect((result?.content as { data?: Record<string, string> })?.data?.["text/plain"]).toBe(
        "42",
      );
      expect(
        figure.some(
          (m) =>
            m.header.msg_type === "display_data" &&
            "image/png" in ((m.content as { data?: object }).data ?? {}),
        ),
      ).toBe(true);
    } finally {
      await kernel.shutdown();
      kernels.dispose();
    }
  }, 240_000);
});
