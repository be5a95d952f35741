/**
 * The daemon asks the scheduler about each profile at start and every interval
 * (profile-checks.ts): a refusal is logged once at warn in the scheduler's words, once more
 * at info when it clears, and the last answers are what diagnostics show.
 */
import { expect, test } from "bun:test";
import type { PlacementCatalog } from "../../src/adapters/backend-slurm/backend-options.ts";
import {
  createProfileChecks,
  type ProfileChecksOptions,
} from "../../src/adapters/backend-slurm/profile-checks.ts";
import type { SbatchTestAnswer } from "../../src/adapters/backend-slurm/profiles-preflight.ts";
import {
  hiddenNamesOf,
  publicMessageRewriter,
} from "../../src/adapters/backend-slurm/public-messages.ts";
import { manualTimeline } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { BASE_PLACEMENT } from "../support/slurm-fixtures.ts";

const PROFILES = ["good", "typo"];
const catalog: PlacementCatalog = {
  profiles: () =>
    PROFILES.map((name) => ({ name }) as unknown as ReturnType<PlacementCatalog["profiles"]>[0]),
  placement: (name) =>
    PROFILES.includes(name)
      ? { ...BASE_PLACEMENT, partition: name === "typo" ? "gpuu" : "gpu" }
      : null,
};
const publicForm = publicMessageRewriter(hiddenNamesOf(catalog));

const REFUSED: SbatchTestAnswer = {
  kind: "Exited",
  exitCode: 1,
  stdout: "",
  stderr: "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
};
const ACCEPTED: SbatchTestAnswer = {
  kind: "Exited",
  exitCode: 0,
  stdout: "",
  stderr: "sbatch: Job 3 to start at 2026-12-04T17:00:00 using 1 processors on nodes n1\n",
};

/** Checks over `catalog` that ask `run`, on a manual timeline, logging to memory. */
function checksAsking(run: ProfileChecksOptions["run"], intervalMs: number) {
  const timeline = manualTimeline();
  const log = memoryLog();
  const checks = createProfileChecks({
    catalog,
    run,
    clock: timeline,
    timers: timeline,
    log,
    intervalMs,
    publicForm,
  });
  return { timeline, log, checks };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

test("a refused profile is logged once in the scheduler's words, its clearing once, and reported", async () => {
  let typoFixed = false;
  const asked: string[] = [];
  const { timeline, log, checks } = checksAsking(async (args) => {
    const partition = args.find((a) => a.startsWith("--partition=")) ?? "";
    asked.push(partition);
    return partition === "--partition=gpuu" && !typoFixed ? REFUSED : ACCEPTED;
  }, 60_000);
  expect(checks.report()).toEqual([]);
  checks.start();
  timeline.advance(0);
  await settle();
  expect(asked).toEqual(["--partition=gpu", "--partition=gpuu"]);
  expect(checks.report().map((c) => [c.profile, c.outcome])).toEqual([
    ["good", "POSSIBLE"],
    ["typo", "IMPOSSIBLE"],
  ]);
  expect(checks.report()[1]?.detail).toContain("Invalid partition name specified");
  expect(checks.report()[1]?.checkedAt).toBe(timeline.now());
  // What a principal reads: no word of the site's partitions.
  expect(checks.report()[1]?.publicDetail).toBe(
    "sbatch: error: Batch job submission failed: Invalid placement name specified",
  );
  const firstRefusedAt = timeline.now();

  // Asked again after the interval: still refused, and not logged again.
  timeline.advance(60_000);
  await settle();
  expect(asked).toHaveLength(4);
  // Refused since the first answer, not the last: "degraded since" in GET /v1/profiles.
  expect(checks.report()[1]?.since).toBe(firstRefusedAt);
  expect(checks.report()[1]?.checkedAt).toBe(timeline.now());
  const warnings = () =>
    log.lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l["level"] === "warn");
  expect(warnings()).toHaveLength(1);
  expect(warnings()[0]?.["profile"]).toBe("typo");
  expect(String(warnings()[0]?.["said"])).toContain("Invalid partition name specified");

  // The admin fixes the cluster: the next run says so once.
  typoFixed = true;
  timeline.advance(60_000);
  await settle();
  expect(checks.report().map((c) => c.outcome)).toEqual(["POSSIBLE", "POSSIBLE"]);
  expect(log.lines.filter((l) => l.includes("accepts a profile again"))).toHaveLength(1);
  await checks.stop();
  expect(timeline.pending()).toBe(0);
});

test("no answer from the scheduler is UNANSWERED, never IMPOSSIBLE, and logged as no refusal", async () => {
  const { timeline, log, checks } = checksAsking(
    async () => ({ kind: "NoAnswer", message: "sbatch: not found on PATH" }),
    60_000,
  );
  checks.start();
  timeline.advance(0);
  await settle();
  expect(checks.report().map((c) => c.outcome)).toEqual(["UNANSWERED", "UNANSWERED"]);
  expect(log.lines.filter((l) => l.includes('"level":"warn"'))).toEqual([]);
  await checks.stop();
});

test("a job of a refused profile accepted by the scheduler clears the refusal at once, not one interval later", async () => {
  const { timeline, log, checks } = checksAsking(
    async (args) => (args.includes("--partition=gpuu") ? REFUSED : ACCEPTED),
    600_000,
  );
  checks.start();
  timeline.advance(0);
  await settle();
  expect(checks.report().map((c) => c.outcome)).toEqual(["POSSIBLE", "IMPOSSIBLE"]);
  // A profile the checks never refused is left alone.
  checks.accepted("good");
  expect(checks.report()[0]?.detail).not.toContain("accepted a job");
  // The admin fixed the partition and a trial went through: no longer degraded.
  timeline.advance(5_000);
  checks.accepted("typo");
  expect(checks.report()[1]).toMatchObject({ outcome: "POSSIBLE", since: timeline.now() });
  expect(log.lines.filter((l) => l.includes("accepts a profile again"))).toHaveLength(1);
  await checks.stop();
});
