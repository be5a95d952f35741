/**
 * Runway on the REAL cluster: a job learns its deadline (OPENAI4S_DEADLINE, the scheduler's
 * own end time in epoch seconds) and is warned with SIGURG before its time limit, so it can
 * save its work. The scheduler checks signals on its own schedule: the warning is awaited
 * with a deadline, never timed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { silentLog } from "../../src/log.ts";
import type { ObservationTarget, SubmitResult } from "../../src/orchestration/ports.ts";
import { createSlurmBackend, type SlurmBackend } from "../../src/orchestration/slurm/backend.ts";
import { eventually } from "../support/eventually.ts";
import { realBroker, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request, target } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

function handleOf(result: SubmitResult | undefined): string {
  if (result?.kind !== "Created" && result?.kind !== "Existing") {
    throw new Error(`expected a job, got ${JSON.stringify(result)}`);
  }
  return result.handle;
}

describe.skipIf(testCluster === null)("slurm-cluster runway", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let backend: SlurmBackend;
  const submitted: ObservationTarget[] = [];

  beforeAll(() => {
    dir = makeTempDir("o4s-slurm-runway-");
    backend = createSlurmBackend({
      broker: realBroker(cluster),
      placements: catalog({
        minute: { ...BASE_PLACEMENT, timeLimitSeconds: 60, warnBeforeLimitSeconds: 50 },
      }),
      clock: systemClock,
      log: silentLog,
    });
  });

  afterAll(async () => {
    await backend.cancel(submitted);
    removeDir(dir);
  });

  test("the job knows its deadline and is warned before the limit", async () => {
    const req = request(
      dir,
      command([
        "/bin/bash",
        "-c",
        'echo "$OPENAI4S_DEADLINE $(date +%s)" > deadline.txt; trap "date +%s > warned.txt; exit 0" URG; for i in $(seq 1 120); do sleep 1; done',
      ]),
      { profile: "minute" },
    );
    const t = target(req, handleOf((await backend.submit([req])).get(req.token)));
    submitted.push(t);
    const deadlineFile = join(req.workspaceDir, "deadline.txt");
    const warnedFile = join(req.workspaceDir, "warned.txt");
    await eventually(() => existsSync(warnedFile), {
      what: "the warning before the limit",
      timeoutMs: 75_000,
      intervalMs: 500,
    });
    const [deadline, startedAt] = readFileSync(deadlineFile, "utf8").trim().split(" ").map(Number);
    // The scheduler's end time: start + the one-minute limit.
    expect(deadline).toBeGreaterThanOrEqual((startedAt ?? 0) + 55);
    expect(deadline).toBeLessThanOrEqual((startedAt ?? 0) + 65);
    const warnedAt = Number(readFileSync(warnedFile, "utf8").trim());
    expect(warnedAt).toBeLessThan(deadline ?? 0);
  }, 90_000);
});
