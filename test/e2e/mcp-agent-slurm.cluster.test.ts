/**
 * The MCP agent of test/e2e/mcp-agent.test.ts on the REAL Slurm dev cluster
 * (scripts/slurm-test-cluster.sh; gated on OPENAI4S_SLURM_TEST_DIR), through the built
 * binary with `serve --backend slurm`: the session's kernel and the job array run as
 * scheduler jobs; the agent speaks MCP over Streamable HTTP with a principal's token, and
 * over stdio through `openai4s mcp --server URL --token-file FILE` as docs/agents.md shows.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  BINARY,
  type Daemon,
  ensureBuilt,
  freePort,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { call, playAgent, textOf } from "../support/mcp-agent.ts";
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

  test("over stdio through openai4s mcp with a token file: a cell on a node, a batch job", async () => {
    const tokenFile = join(scratch, "alice.token");
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const client = new Client({ name: "slurm-agent-stdio", version: "1.0.0" });
    await client.connect(
      new StdioClientTransport({
        command: BINARY,
        args: ["mcp", "--server", `http://127.0.0.1:${port}`, "--token-file", tokenFile],
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
        stderr: "inherit",
      }),
    );
    try {
      const started = await call(client, "start_session", {
        profile: "agent",
        waitSeconds: 120,
        idempotency_key: "stdio-session",
      });
      expect(started.isError, textOf(started)).toBeUndefined();
      const { session } = JSON.parse(textOf(started)) as { session: string };
      const cell = await call(client, "run_code", {
        session,
        code: "import os; print(os.environ['SLURM_JOB_ID'] != '', 6 * 7)",
      });
      expect(cell.isError, textOf(cell)).toBeUndefined();
      expect(textOf(cell)).toContain("True 42");
      const submitted = await call(client, "submit_batch", {
        command: ["hostname"],
        profile: "agent",
        idempotency_key: "stdio-batch",
      });
      expect(submitted.isError, textOf(submitted)).toBeUndefined();
      const batch = (JSON.parse(textOf(submitted)) as { workload: string }).workload;
      await eventually(
        async () => {
          const status = JSON.parse(
            textOf(await call(client, "job_status", { workload: batch })),
          ) as { phase: string };
          if (["FAILED", "CANCELLED", "LOST"].includes(status.phase))
            throw new Error(`batch ${status.phase}`);
          return status.phase === "COMPLETED" ? true : null;
        },
        { what: "the batch job COMPLETED", timeoutMs: 120_000, intervalMs: 500 },
      );
      const log = await call(client, "job_logs", { workload: batch });
      expect(textOf(log)).toMatch(/\bn[12]\b/);
      // The session is alice's: the token file's principal, not the admin.
      const shown = (await d.show(session)) as unknown as { owner: string | null };
      expect(shown.owner).toBe("alice");
      expect((await call(client, "stop_session", { session })).isError).toBeUndefined();
    } finally {
      await client.close();
    }
  }, 300_000);
});
