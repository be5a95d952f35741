/**
 * Files in and out on the REAL cluster: the spool is the filesystem the nodes share, so an
 * input uploaded through the API (0600, as a secret would be) is read by the job on its node,
 * and what the job wrote is downloaded through the API, whole and by range.
 */
import { describe, expect, test } from "bun:test";
import { clusterDaemonForBlock } from "../support/cluster-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";

describe.skipIf(testCluster === null)("slurm-cluster workspace files", () => {
  const cluster = testCluster as TestCluster;
  const harness = clusterDaemonForBlock(cluster, "o4s-slurm-files-");
  // Raw requests: an upload's body is the file, and a download's answer is read as text.
  const call = (method: string, path: string, init: RequestInit = {}) =>
    fetch(`http://localhost${path}`, { unix: harness.socket, method, ...init });

  test("an uploaded input is read by the job; its output is downloaded", async () => {
    const created = await call("POST", "/v1/workloads", {
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        kind: "BATCH",
        profile: "small",
        command: [
          "/bin/sh",
          "-c",
          "while [ ! -f in/input.txt ]; do sleep 0.2; done; tr a-z A-Z < in/input.txt > out.txt",
        ],
      }),
    });
    expect(created.status).toBe(201);
    const id = String(((await created.json()) as { id: string }).id);
    const put = await call("PUT", `/v1/workloads/${id}/files/in/input.txt?mode=0600`, {
      body: "from the scientist\n",
    });
    expect(put.status).toBe(201);
    await eventually(
      async () =>
        ((await (await call("GET", `/v1/workloads/${id}`)).json()) as { phase: string }).phase ===
        "COMPLETED",
      { timeoutMs: 90_000, intervalMs: 250, what: "the job to complete" },
    );
    const out = await call("GET", `/v1/workloads/${id}/files/out.txt`);
    expect(out.status).toBe(200);
    expect(await out.text()).toBe("FROM THE SCIENTIST\n");
    const part = await call("GET", `/v1/workloads/${id}/files/out.txt`, {
      headers: { Range: "bytes=5-7" },
    });
    expect(part.status).toBe(206);
    expect(await part.text()).toBe("THE");
  }, 120_000);
});
