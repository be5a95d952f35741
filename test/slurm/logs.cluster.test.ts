/**
 * Job output on the REAL cluster: the batch job writes into the shared state dir, and
 * `GET .../logs?follow=true` (and `openai4s logs --follow`) shows it while the job runs and
 * ends when the attempt ends.
 */
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLogsCommand } from "../../src/apps/cli/logs.ts";
import { captureIo } from "../support/cli-runtime.ts";
import { clusterDaemonForBlock } from "../support/cluster-daemon.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";

describe.skipIf(testCluster === null)("slurm-cluster job logs", () => {
  const cluster = testCluster as TestCluster;
  const harness = clusterDaemonForBlock(cluster, "o4s-slurm-logs-");
  const { api } = harness;

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
      unix: harness.socket,
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
    writeFileSync(join(harness.daemon.layout.workspaceDir(id), "gate"), "");
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text).toBe("first\nsecond\n");
    const after = await api("GET", `/v1/workloads/${id}`);
    expect(after.body["phase"]).toBe("COMPLETED");

    const io = captureIo({ OPENAI4S_SERVER: `unix:${harness.socket}` });
    expect(await createLogsCommand().run([id, "--stderr", "--follow"], io)).toBe(0);
    expect(io.out()).toBe("oops\n");
  }, 120_000);
});
