/**
 * Whose jobs the one squeue per tick lists. A daemon that submits as the job's owner
 * (`run_as = "owner"`) must list every account's jobs: listed by its own uid only, an owner's
 * job would be missing from the queue, read as gone, and end LOST while it runs.
 */
import { describe, expect, test } from "bun:test";
import { squeueArgv } from "../../src/adapters/backend-slurm/broker-argv.ts";

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
  });
});
