/**
 * A profile the cluster cannot run is named at start, on the REAL cluster: the daemon asks
 * the scheduler about each profile (a dry run), and diagnostics show the refusal in the
 * scheduler's words. Before, a profile naming a partition that does not exist started
 * without a word and every submission to it ended "invalid placement specified: [hidden]".
 */
import { describe, expect, test } from "bun:test";
import { clusterDaemonForBlock } from "../support/cluster-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";

const TOML = [
  "[profiles.small]",
  'description = "one CPU"',
  'partition = "debug"',
  "cpus = 1",
  "memory_mb = 50",
  "time_limit_minutes = 5",
  "allow_batch = true",
  "",
  "[profiles.typo]",
  'description = "a partition this cluster does not have"',
  'partition = "gpuu"',
  "cpus = 1",
  "memory_mb = 50",
  "time_limit_minutes = 5",
  "allow_batch = true",
  "",
].join("\n");

interface Check {
  readonly profile: string;
  readonly outcome: string;
  readonly detail: string;
}

describe.skipIf(testCluster === null)("slurm-cluster: the scheduler's word on each profile", () => {
  const d = clusterDaemonForBlock(testCluster as TestCluster, "o4s-profile-checks-", {
    toml: TOML,
  });

  test("diagnostics show the impossible profile in the scheduler's words, the good one possible", async () => {
    const checks = await eventually(
      async () => {
        const { body } = await d.api("GET", "/v1/diagnostics");
        const found = (body["backend"] as { profileChecks?: Check[] }).profileChecks ?? [];
        if (found.length === 2) return found;
        throw new Error(`not yet: ${JSON.stringify(found)}`);
      },
      { what: "both profiles checked", timeoutMs: 60_000 },
    );
    const byName = new Map(checks.map((c) => [c.profile, c]));
    expect(byName.get("small")?.outcome).toBe("POSSIBLE");
    expect(byName.get("typo")?.outcome).toBe("IMPOSSIBLE");
    expect(byName.get("typo")?.detail).toContain("Invalid partition name specified");
  }, 90_000);
});
