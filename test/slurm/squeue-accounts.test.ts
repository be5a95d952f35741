/**
 * Whose jobs the one squeue per tick lists. A daemon that submits as the job's owner
 * (`run_as = "owner"`) must list every account's jobs: listed by its own uid only, an owner's
 * job would be missing from the queue, read as gone, and end LOST while it runs; and the
 * orphan sweep would never find an owner's job the store forgot (issue 22).
 */
import { describe, expect, test } from "bun:test";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { liveJobsArgv, squeueArgv } from "../../src/adapters/backend-slurm/broker-argv.ts";
import {
  createOrphanSweeper,
  jobComment,
} from "../../src/adapters/backend-slurm/orphan-sweeper.ts";
import { manualClock, manualTimeline } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { recordingRunner } from "../support/recording-runner.ts";
import { newToken } from "../support/slurm-fixtures.ts";

function argvOf(uid: number | null): readonly string[] {
  const result = squeueArgv({ uid, names: ["o4s-abc"] });
  if (result.kind !== "Valid") throw new Error(result.message);
  return result.argv;
}

describe("squeue lists the accounts the daemon's jobs belong to", () => {
  test("the service account alone by default", () => {
    expect(argvOf(1234)).toContain("--user=1234");
  });

  test("every account when jobs are submitted as their owners", () => {
    expect(argvOf(null).some((a) => a.startsWith("--user"))).toBe(false);
    expect(argvOf(null)).toContain("--states=all");
  });

  test("a bad uid is refused, never passed on", () => {
    expect(squeueArgv({ uid: -1, names: ["o4s-abc"] }).kind).toBe("Invalid");
    expect(liveJobsArgv(-1).kind).toBe("Invalid");
  });
});

describe("the orphan sweep lists what the observe path lists", () => {
  const OWNER_ID = "abcdefghijkl";
  const orphan = newToken();
  const known = newToken();
  const userOwn = newToken();
  // An every-account listing: our forgotten job (run as a scientist), our known one, a job of
  // another daemon, and a scientist's own jobs (one with no comment, one with a token-shaped
  // comment and no owner id).
  const listing = [
    `101|RUNNING|${jobComment(orphan, OWNER_ID)}`,
    `102|RUNNING|${jobComment(known, OWNER_ID)}`,
    `103|RUNNING|${jobComment(newToken(), "zzzzzzzzzzzz")}`,
    "104|PENDING|(null)",
    `105|RUNNING|${userOwn}`,
    "",
  ].join("\n");

  function sweeperOver(listUid: number | null) {
    // squeue prints the listing; scancel succeeds.
    const { runner, calls } = recordingRunner((r) => (r.program === "squeue" ? listing : ""));
    const sweeper = createOrphanSweeper({
      broker: createSlurmBroker({ runner, path: "/usr/bin:/bin", listUid }),
      ownerId: OWNER_ID,
      policy: "cancel",
      intervalMs: 60_000,
      knownTokens: (tokens) => new Set(tokens.filter((t) => t === known)),
      clock: manualClock(),
      timers: manualTimeline(),
      log: memoryLog(),
    });
    return { sweeper, calls };
  }

  test("owner mode: every account is listed, and only our forgotten job is cancelled", async () => {
    const { sweeper, calls } = sweeperOver(null);
    const report = await sweeper.sweepOnce();
    const squeue = calls.find((c) => c.program === "squeue");
    expect(squeue?.args.some((a) => a.startsWith("--user"))).toBe(false);
    expect(report.jobs.map((j) => [j.handle, j.action])).toEqual([["101", "CANCEL_REQUESTED"]]);
    const scancel = calls.filter((c) => c.program === "scancel");
    expect(scancel).toHaveLength(1);
    expect(scancel[0]?.args.filter((a) => /^\d+$/.test(a))).toEqual(["101"]);
  });

  test("otherwise the service account alone is listed", async () => {
    const { sweeper, calls } = sweeperOver(4242);
    await sweeper.sweepOnce();
    expect(calls.find((c) => c.program === "squeue")?.args).toContain("--user=4242");
  });
});
