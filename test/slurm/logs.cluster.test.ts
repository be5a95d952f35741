/**
 * Job output on the REAL cluster: the batch job writes into the shared state dir, and
 * `GET .../logs?follow=true` (and `openai4s logs --follow`) shows it while the job runs and
 * ends when the attempt ends.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLogsCommand } from "../../src/apps/cli/logs.ts";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import { captureIo } from "../support/cli-runtime.ts";
import {
  clusterDaemonConfig,
  startedDaemon,
  writeSmallClusterConfig,
} from "../support/daemon-config.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

describe.skipIf(testCluster === null)("slurm-cluster job logs", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let socket: string;
  let daemon: RunningDaemon;

  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`http://localhost${path}`, {
      unix: socket,
      method,
      ...(body === undefined
        ? {}
        : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    dir = makeTempDir("o4s-slurm-logs-");
    socket = join(dir, "api.sock");
    const config = writeSmallClusterConfig(dir);
    daemon = await startedDaemon(
      clusterDaemonConfig(cluster, { dir, socket, clusterConfigPath: config }),
    );
  });

  afterAll(async () => {
    await daemon?.stop();
    removeDir(dir);
  });

  test("follow shows the output while the job runs and ends with the attempt", async () => {
    // The job waits for a file this test creates in its workspace (all a sandboxed job
    // running as another uid can see), so "shown while running" does not depend on timing:
    // the first line must arrive while the job is provably still there.
    const created = await api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      command: [
        "/bin/sh",
        "-c",
        "echo first; echo oops >&2; while [ ! -e gate ]; do sleep 0.2; done; echo second",
      ],
    });
    expect(created.status).toBe(201);
    const id = String(created.body["id"]);
    const response = await fetch(`http://localhost/v1/workloads/${id}/logs?follow=true`, {
      unix: socket,
    });
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes("first\n")) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`stream ended early: ${JSON.stringify(text)}`);
      text += decoder.decode(value, { stream: true });
    }
    const midway = await api("GET", `/v1/workloads/${id}`);
    // The store may still say QUEUED (the job printed before the next observation): the
    // point is that it has not ended.
    expect(["QUEUED", "RUNNING"]).toContain(String(midway.body["phase"]));
    writeFileSync(join(daemon.layout.workspaceDir(id), "gate"), "");
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text).toBe("first\nsecond\n");
    const after = await api("GET", `/v1/workloads/${id}`);
    expect(after.body["phase"]).toBe("COMPLETED");

    const io = captureIo({ OPENAI4S_SERVER: `unix:${socket}` });
    expect(await createLogsCommand().run([id, "--stderr", "--follow"], io)).toBe(0);
    expect(io.out()).toBe("oops\n");
  }, 120_000);
});
