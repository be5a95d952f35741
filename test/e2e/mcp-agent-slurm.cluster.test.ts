/**
 * The MCP agent of test/e2e/mcp-agent.test.ts on the REAL Slurm dev cluster
 * (scripts/slurm-test-cluster.sh; gated on OPENAI4S_SLURM_TEST_DIR), through the built
 * binary with `serve --backend slurm`: the session's kernel and the job array run as
 * scheduler jobs; the agent speaks MCP over Streamable HTTP with a principal's token.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { playAgent } from "../support/mcp-agent.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CLUSTER_TOML = `[profiles.agent]
description = "One CPU for an agent's session and its jobs"
partition = "debug"
cpus = 1
memory_mb = 400
time_limit_minutes = 10
allow_sessions = true
allow_batch = true
`;

describe.skipIf(testCluster === null)("an agent through MCP on Slurm", () => {
  const cluster = testCluster as TestCluster;
  let d: Daemon;
  let scratch: string;
  let port: number;
  let token: string;

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-mcp-slurm-");
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
    expect((await d.cli("principal", "add", "alice")).code).toBe(0);
    token = (await d.cli("token", "issue", "alice")).stdout.trim();
  }, 300_000);

  afterAll(async () => {
    if (!d) return;
    // Leave nothing running on the shared cluster: cancel this daemon's workloads first.
    const listed = await d.cli("list", "--json");
    for (const w of (JSON.parse(listed.stdout || '{"items":[]}') as { items: { id: string }[] })
      .items) {
      await d.cli("cancel", w.id);
    }
    await d.stop();
    removeDir(scratch);
  }, 120_000);

  test("session, CSV, pandas, a PNG, a 5-element array's logs, a cancelled cell", async () => {
    const client = new Client({ name: "slurm-agent", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    try {
      const run = await playAgent(client, { session: "agent", batch: "agent" }, "slurm");
      console.log(
        `slurm: start progress ${run.startProgress}, cancel to idle ${run.cancelToIdleMs.toFixed(0)} ms`,
      );
    } finally {
      await client.close();
    }
  }, 600_000);
});
