/** The site settings the daemon follows, read through the broker from the REAL controller. */
import { describe, expect, test } from "bun:test";
import {
  adminCommand,
  realBroker,
  type TestCluster,
  testCluster,
} from "../support/slurm-cluster.ts";

describe.skipIf(testCluster === null)("slurm-cluster site configuration", () => {
  const cluster = testCluster as TestCluster;

  test("MaxArraySize is the controller's, through one scontrol", async () => {
    const printed = /^MaxArraySize\s*=\s*([0-9]+)$/m.exec(
      adminCommand(cluster, "scontrol", "show", "config"),
    )?.[1];
    expect(printed).toMatch(/^[0-9]+$/);
    const broker = realBroker(cluster);
    const answer = await broker.readSiteConfig();
    if (answer.kind !== "Answered") throw new Error(answer.error.message);
    expect(answer.value.maxArraySize).toBe(Number(printed));
    expect(broker.callCounts().scontrol).toBe(1);
  });
});
