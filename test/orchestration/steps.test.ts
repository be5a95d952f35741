/** The steps rule (INV-4) as a pure function of the backend, the workload and its attempts. */
import { describe, expect, test } from "bun:test";
import {
  type Allocation,
  externalHandle,
  submissionToken,
  type Workload,
} from "../../src/core/models.ts";
import type { TaskResult } from "../../src/core/ports/allocation-backend.ts";
import { placeStep } from "../../src/core/steps.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const base = fakeBackend({ name: "test", profiles: () => [] });
const withSteps = fakeBackend({
  profiles: () => [],
  capabilities: {
    tasks: {
      runTask: async (): Promise<TaskResult> => ({
        kind: "Completed",
        exitCode: 0,
        stdout: "",
        stderr: "",
      }),
    },
  },
});

function workload(overrides: Partial<Workload> = {}): Workload {
  return {
    id: "w1",
    kind: "BATCH",
    name: "w1",
    profile: "default",
    spec: { command: ["sleep", "60"] },
    specRevision: 1,
    phase: "RUNNING",
    reason: null,
    message: null,
    desired: { kind: "RUN" },
    executionEpoch: 2,
    maxAttempts: 2,
    exitCode: null,
    idempotencyKey: null,
    createdAt: 1,
    updatedAt: 1,
    lastActiveAt: null,
    ...overrides,
  } as Workload;
}

function attempt(epoch: number, overrides: Partial<Allocation> = {}): Allocation {
  return {
    id: `a${epoch}`,
    workloadId: "w1",
    epoch,
    token: submissionToken(`o4s-${"t".repeat(25)}${epoch}`),
    handle: externalHandle(`job-${epoch}`),
    phase: "RUNNING",
    reason: null,
    message: null,
    exitCode: null,
    submittedAt: 1,
    startedAt: 1,
    endedAt: null,
    acknowledgedAt: null,
    deadlineAt: null,
    deadlineWarnedAt: null,
    ...overrides,
  };
}

describe("placeStep", () => {
  test("runs in the current attempt's running allocation", () => {
    const placed = placeStep(withSteps, workload(), [
      attempt(1, { phase: "FAILED", reason: "NODE_FAILURE" }),
      attempt(2),
    ]);
    expect(placed.kind).toBe("Placed");
    if (placed.kind !== "Placed") return;
    expect(placed.target).toEqual({
      allocationId: "a2",
      token: attempt(2).token,
      handle: externalHandle("job-2"),
    });
  });

  test("a backend that cannot run steps refuses first", () => {
    expect(placeStep(base, workload(), [attempt(2)])).toEqual({
      kind: "Refused",
      reason: "STEPS_UNSUPPORTED",
      message: "backend test cannot run steps inside an allocation",
    });
  });

  test("an ended workload, or one being stopped, is refused", () => {
    const ended = placeStep(withSteps, workload({ phase: "COMPLETED" }), [attempt(2)]);
    expect(ended).toMatchObject({ kind: "Refused", reason: "WORKLOAD_ENDING" });
    const stopping = placeStep(
      withSteps,
      workload({ desired: { kind: "STOP", reason: "USER_CANCELLED", message: "bye" } }),
      [attempt(2)],
    );
    expect(stopping).toEqual({
      kind: "Refused",
      reason: "WORKLOAD_ENDING",
      message: "workload w1 is RUNNING and being stopped",
    });
  });

  test.each([
    ["no attempt at all", []],
    ["only an older attempt running (never a step in a superseded allocation)", [attempt(1)]],
    ["the current attempt still queued", [attempt(2, { phase: "QUEUED" })]],
    ["the current attempt without a handle", [attempt(2, { handle: null })]],
  ])("%s: refused, never a new submission in its place (INV-4)", (_label, allocations) => {
    expect(placeStep(withSteps, workload(), allocations)).toEqual({
      kind: "Refused",
      reason: "NO_LIVE_ALLOCATION",
      message: "workload w1 has no running allocation to run a step in",
    });
  });
});
