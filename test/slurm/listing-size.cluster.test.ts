/**
 * The real squeue at 10,000 watched names (the E2BIG of `--name=` with every name joined),
 * beside a job of the same account submitted by hand whose name holds a `|` and a newline:
 * the listing by user must read ours and skip it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createSlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import type { SlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import {
  adminCommand,
  realBroker,
  type TestCluster,
  testCluster,
} from "../support/slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, newToken, request } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

describe.skipIf(testCluster === null)("slurm-cluster listing at 10,000 names", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let broker: SlurmBroker;
  const held: string[] = [];

  beforeAll(() => {
    dir = makeTempDir("o4s-slurm-listing-");
    broker = realBroker(cluster);
  });

  afterAll(() => {
    if (held.length > 0) adminCommand(cluster, "scancel", ...held);
    removeDir(dir);
  });

  test("one squeue answers with our job among 10,000 names and a hostile neighbour", async () => {
    // Held, so it never runs: only its line in the listing matters.
    const neighbour = adminCommand(
      cluster,
      "sbatch",
      "--parsable",
      "--hold",
      "--job-name=evil|na\nme",
      "--comment=c|x\ny",
      "--output=/dev/null",
      "--wrap=true",
    ).trim();
    expect(neighbour).toMatch(/^[0-9]+$/);
    held.push(neighbour);
    const backend = createSlurmBackend({
      broker,
      placements: catalog({ cpu: BASE_PLACEMENT }),
      clock: systemClock,
      log: silentLog,
    });
    const req = request(dir, command(["/bin/true"]));
    const submitted = (await backend.submit([req])).get(req.token);
    if (submitted?.kind !== "Created") throw new Error(JSON.stringify(submitted));
    const names = Object.freeze([...Array.from({ length: 9_999 }, () => newToken()), req.token]);
    const before = broker.callCounts().squeue;
    const answer = await broker.listQueue(names);
    if (answer.kind !== "Answered") throw new Error(answer.error.message);
    expect(broker.callCounts().squeue).toBe(before + 1);
    expect(answer.value.map((r) => r.jobId)).toEqual([submitted.handle]);
  }, 60_000);
});
