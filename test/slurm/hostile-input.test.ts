/**
 * Defects found by hostile acceptance testing of the Slurm side, pinned with the real broker
 * and parsers over a fake cluster (what a real cluster cannot produce on demand).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createSlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { loadClusterConfig } from "../../src/adapters/backend-slurm/profiles.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { fakeCluster } from "../support/fake-slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const dir = makeTempDir("o4s-acc-slurm-");
afterAll(() => removeDir(dir));

/** What every client prints when SLURM_CONF names a file it cannot parse (measured, 22.05). */
const BROKEN_CONF =
  'squeue: error: Parse error in file /etc/slurm/slurm.conf line 1: "garbage"\n' +
  "squeue: error: ClusterName needs to be specified\n" +
  "squeue: fatal: Unable to process configuration file\n";

function backendOver(cluster: ReturnType<typeof fakeCluster>) {
  return createSlurmBackend({
    broker: createSlurmBroker({ runner: cluster, path: "/usr/bin:/bin" }),
    placements: catalog({ cpu: BASE_PLACEMENT }),
    clock: manualClock(),
    log: memoryLog(),
  });
}

describe("a scheduler that cannot read its own configuration", () => {
  test("diagnostics report the backend unhealthy when squeue cannot answer", async () => {
    const cluster = fakeCluster();
    const backend = backendOver(cluster);
    cluster.persist("squeue", { kind: "refuse", stderr: BROKEN_CONF });
    const observed = await backend.observe([]);
    expect(observed.kind).toBe("Observed"); // nothing asked, nothing called
    const req = request(dir, command(["/bin/true"]));
    const found = await backend.findByToken([req.token]);
    expect(found.get(req.token)?.kind).toBe("Unavailable");
    const diag = await backend.diagnostics();
    // Before the fix: healthy, "no calls yet", while every tick was backendUnavailable.
    expect(diag.healthy).toBe(false);
    expect(diag.message).toContain("Unable to process configuration file");
  });

  test("sbatch failing on the configuration file is Unknown, never SUBMIT_REJECTED", async () => {
    const cluster = fakeCluster();
    const backend = backendOver(cluster);
    cluster.inject("sbatch", {
      kind: "refuse",
      stderr: BROKEN_CONF.replaceAll("squeue:", "sbatch:"),
    });
    const req = request(dir, command(["/bin/true"]));
    const result = (await backend.submit([req])).get(req.token);
    // A broken slurm.conf (an admin mid-edit, an NFS hiccup) says nothing about the job:
    // failing it would terminate every workload submitted during the hiccup.
    expect(result?.kind).toBe("Unknown");
  });
});

describe("cluster.toml that is not a regular file", () => {
  test("an endless device is refused promptly instead of read to exhaustion", () => {
    const started = performance.now();
    const load = loadClusterConfig({ path: "/dev/zero" });
    expect(load.kind).toBe("Unreadable");
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
