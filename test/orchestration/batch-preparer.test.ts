import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { batchPreparer } from "../../src/adapters/spool/batch-preparer.ts";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import { type StateLayout, stateLayout } from "../../src/core/layout.ts";
import {
  type Allocation,
  mintSubmissionToken,
  type Workload,
  type WorkloadSpec,
} from "../../src/core/models.ts";
import { preparerByKind } from "../../src/core/preparer-by-kind.ts";
import { tempDirs } from "../support/temp-dir.ts";

const root = tempDirs("o4s-", "each");

function workload(kind: Workload["kind"], spec: WorkloadSpec): Workload {
  return {
    id: "w1",
    kind,
    name: "n",
    profile: "default",
    spec,
    specRevision: 1,
    phase: "SUBMITTING",
    reason: null,
    message: null,
    desired: { kind: "RUN" },
    executionEpoch: 1,
    maxAttempts: 1,
    exitCode: null,
    idempotencyKey: null,
    createdAt: 0,
    updatedAt: 0,
    lastActiveAt: null,
  };
}

const allocation: Allocation = {
  id: "a1",
  workloadId: "w1",
  epoch: 1,
  token: mintSubmissionToken((n) => new Uint8Array(n)),
  handle: null,
  phase: "SUBMITTING",
  reason: null,
  message: null,
  exitCode: null,
  submittedAt: null,
  startedAt: null,
  endedAt: null,
  acknowledgedAt: null,
  deadlineAt: null,
  deadlineWarnedAt: null,
};

const mode = (path: string) => statSync(path).mode & 0o777;

/** A layout whose spool exists, as the daemon makes it at start. */
function spooledLayout(): StateLayout {
  const layout = stateLayout(join(root(), "state"));
  mkdirSync(layout.spool, { mode: 0o711 });
  return layout;
}

describe("batchPreparer", () => {
  test("derives a COMMAND launch and creates the workspace and allocation dirs 0700", async () => {
    const layout = spooledLayout();
    const old = process.umask(0o022);
    try {
      const result = await batchPreparer({ layout }).prepare(
        workload("BATCH", { command: ["python", "x.py"], env: { A: "1" }, timeLimitSeconds: 90 }),
        allocation,
      );
      expect(result).toEqual({
        kind: "Prepared",
        attempt: {
          launch: { kind: "COMMAND", command: ["python", "x.py"], env: { A: "1" } },
          allocationDir: layout.allocationDir("w1", "a1"),
          workspaceDir: layout.workspaceDir("w1"),
          timeLimitSeconds: 90,
        },
      });
      expect(mode(layout.workloadDir("w1"))).toBe(0o700);
      expect(mode(layout.workspaceDir("w1"))).toBe(0o700);
      expect(mode(layout.allocationDir("w1", "a1"))).toBe(0o700);
    } finally {
      process.umask(old);
    }
  });

  test("a spool directory swapped for a link is refused: nothing made or chmodded where it points", async () => {
    const layout = spooledLayout();
    const outside = join(root(), "outside");
    mkdirSync(outside, { mode: 0o755 });
    symlinkSync(outside, join(layout.spool, "workloads"));
    const w = workload("BATCH", { command: ["true"] });
    await expect(batchPreparer({ layout }).prepare(w, allocation)).rejects.toThrow(
      "refusing to follow it",
    );
    expect(readdirSync(outside)).toEqual([]);
    expect(mode(outside)).toBe(0o755);
  });

  test("is re-executable and tightens a directory left too open", async () => {
    const layout = spooledLayout();
    const preparer = batchPreparer({ layout });
    const w = workload("BATCH", { command: ["true"] });
    const first = await preparer.prepare(w, allocation);
    chmodSync(layout.workspaceDir("w1"), 0o755);
    const second = await preparer.prepare(w, allocation);
    expect(second).toEqual(first);
    expect(mode(layout.workspaceDir("w1"))).toBe(0o700);
    if (second.kind === "Prepared") expect(second.attempt.timeLimitSeconds).toBeNull();
  });

  test("refuses what it cannot run, before touching the filesystem", async () => {
    const layout = stateLayout(join(root(), "state"));
    const preparer = batchPreparer({ layout });
    expect(await preparer.prepare(workload("BATCH", {}), allocation)).toMatchObject({
      kind: "Refused",
      reason: "INTERNAL_ERROR",
    });
    expect(await preparer.prepare(workload("BATCH", { command: [] }), allocation)).toMatchObject({
      kind: "Refused",
    });
    expect(
      await preparer.prepare(workload("SESSION", { command: ["x"] }), allocation),
    ).toMatchObject({ kind: "Refused" });
    expect(() => statSync(layout.root)).toThrow();
  });

  test("a directory that cannot be created throws (broken infrastructure), it does not refuse", async () => {
    const base = root();
    // The spool is where the preparer creates directories.
    writeFileSync(join(base, "state-spool"), "a file where a directory should be");
    const preparer = batchPreparer({ layout: stateLayout(join(base, "state")) });
    await expect(
      preparer.prepare(workload("BATCH", { command: ["true"] }), allocation),
    ).rejects.toThrow();
  });
});

describe("preparerByKind", () => {
  test("dispatches on the workload's kind and refuses kinds it has no preparer for", async () => {
    const seen: string[] = [];
    const fake = (name: string): AttemptPreparer => ({
      prepare: async () => {
        seen.push(name);
        return { kind: "Refused", reason: "INTERNAL_ERROR", message: name };
      },
    });
    const both = preparerByKind({ BATCH: fake("batch"), SESSION: fake("session") });
    await both.prepare(workload("SESSION", {}), allocation);
    await both.prepare(workload("BATCH", {}), allocation);
    expect(seen).toEqual(["session", "batch"]);
    const batchOnly = preparerByKind({ BATCH: fake("batch") });
    expect(await batchOnly.prepare(workload("SESSION", {}), allocation)).toEqual({
      kind: "Refused",
      reason: "INTERNAL_ERROR",
      message: "no attempt preparer is configured for SESSION workloads",
    });
  });
});
