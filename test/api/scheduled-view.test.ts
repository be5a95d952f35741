/** The SCHEDULED condition and the hint: why a workload waits, and what its reason asks. */
import { describe, expect, test } from "bun:test";
import { type Allocation, REASONS, type Workload } from "../../src/core/models.ts";
import { hintFor, REASON_HINTS } from "../../src/core/reason-hints.ts";
import { workloadView } from "../../src/servers/http/views.ts";

const workload = (over: Partial<Workload>): Workload => ({
  id: "w1",
  kind: "BATCH",
  name: "w1",
  profile: "default",
  spec: {},
  specRevision: 1,
  phase: "QUEUED",
  reason: "HELD",
  message: "waiting: JobHeldAdmin",
  desired: { kind: "RUN" },
  executionEpoch: 1,
  maxAttempts: 1,
  exitCode: null,
  idempotencyKey: null,
  createdAt: 1_000,
  updatedAt: 2_000,
  lastActiveAt: null,
  ...over,
});

const allocation = (over: Partial<Allocation>): Allocation =>
  ({
    id: "a1",
    workloadId: "w1",
    epoch: 1,
    token: "o4s-aaaaaaaaaaaaaaaaaaaaaaaaaa",
    handle: null,
    phase: "QUEUED",
    reason: null,
    message: null,
    exitCode: null,
    submittedAt: 1_500,
    startedAt: null,
    endedAt: null,
    acknowledgedAt: null,
    deadlineAt: null,
    deadlineWarnedAt: null,
    ...over,
  }) as Allocation;

describe("SCHEDULED and hint", () => {
  test("a queued workload shows SCHEDULED False with the reason it waits, and what to do", () => {
    const view = workloadView(workload({}), [], [allocation({})], 2_000);
    expect(view.conditions[0]).toEqual({
      type: "SCHEDULED",
      status: "FALSE",
      reason: "HELD",
      message: "waiting: JobHeldAdmin",
      lastTransitionTime: new Date(2_000).toISOString(),
    });
    expect(view.hint).toBe("an administrator holds it: ask them to release it");
  });

  test("a running workload is SCHEDULED True since its allocation started", () => {
    const view = workloadView(
      workload({ kind: "SESSION", phase: "RUNNING", reason: null }),
      [],
      [allocation({ phase: "RUNNING", startedAt: 1_700 })],
      2_000,
    );
    expect(view.conditions.map((c) => `${c.type}:${c.status}`)[0]).toBe("SCHEDULED:TRUE");
    expect(view.conditions[0]?.lastTransitionTime).toBe(new Date(1_700).toISOString());
    expect(view.conditions).toHaveLength(6);
    expect(view.hint).toBeNull();
  });

  test("a failure that never started says why, and its hint says what to do", () => {
    const view = workloadView(
      workload({
        phase: "FAILED",
        reason: "OUT_OF_MEMORY",
        message: "OUT_OF_MEMORY: used 310 MiB of the 50 MiB asked for",
      }),
      [],
      [allocation({ phase: "FAILED", startedAt: 1_600 })],
      2_000,
    );
    expect(view.conditions[0]?.status).toBe("TRUE");
    expect(view.hint).toContain("more memory");
  });

  test("TIME_REMAINING: the current attempt's stored end time, counted down by the clock", () => {
    const running = workload({ phase: "RUNNING", reason: "STARTED", executionEpoch: 1 });
    const current = allocation({ phase: "RUNNING", startedAt: 1_000, deadlineAt: 601_000 });
    const at = (nowMs: number) => workloadView(running, [], [current], nowMs);
    expect(at(1_000).deadline).toBe(new Date(601_000).toISOString());
    expect(at(1_000).timeRemainingSeconds).toBe(600);
    expect(at(301_500).timeRemainingSeconds).toBe(299);
    // Past the deadline (the backend has not ended it yet): zero, never negative.
    expect(at(700_000).timeRemainingSeconds).toBe(0);
    expect(at(1_000).allocations[0]?.deadline).toBe(new Date(601_000).toISOString());
  });

  test("TIME_REMAINING is null without an end time, or once the workload does not hold it", () => {
    const noLimit = workloadView(
      workload({ phase: "RUNNING", executionEpoch: 1 }),
      [],
      [allocation({ phase: "RUNNING", startedAt: 1_000 })],
      2_000,
    );
    expect(noLimit.deadline).toBeNull();
    expect(noLimit.timeRemainingSeconds).toBeNull();
    const ended = workloadView(
      workload({ phase: "COMPLETED", reason: "EXITED_ZERO", executionEpoch: 1 }),
      [],
      [allocation({ phase: "COMPLETED", startedAt: 1_000, deadlineAt: 601_000 })],
      2_000,
    );
    expect(ended.deadline).toBeNull();
    expect(ended.timeRemainingSeconds).toBeNull();
    // The attempt keeps its own deadline in its history.
    expect(ended.allocations[0]?.deadline).toBe(new Date(601_000).toISOString());
  });

  test("every hinted reason is a reason code, and no hint names the scheduler's vocabulary", () => {
    for (const [reason, hint] of Object.entries(REASON_HINTS)) {
      expect(REASONS as readonly string[]).toContain(reason);
      expect(hint).not.toMatch(/partition|qos|slurm|account/i);
    }
    expect(hintFor("NOT_A_REASON")).toBeNull();
    expect(hintFor("__proto__")).toBeNull();
  });

  test("an out-of-memory or time-limit end's hint is the backend's explanation, with its figures", () => {
    const oom = workloadView(
      workload({
        phase: "FAILED",
        reason: "OUT_OF_MEMORY",
        message:
          "OUT_OF_MEMORY: used 1.9 GiB of the 2.0 GiB asked for: ask for more memory (profile with more memory: big-mem)",
      }),
      [],
      [],
      2_000,
    );
    expect(oom.hint).toBe(
      "used 1.9 GiB of the 2.0 GiB asked for: ask for more memory (profile with more memory: big-mem)",
    );
    const late = workloadView(
      workload({
        phase: "FAILED",
        reason: "TIME_LIMIT_EXCEEDED",
        message: "TIME_LIMIT_EXCEEDED: ran 1:00:00 of 1:00:00: raise timeLimitSeconds",
      }),
      [],
      [],
      2_000,
    );
    expect(late.hint).toBe("ran 1:00:00 of 1:00:00: raise timeLimitSeconds");
    // A message without figures (the local backend's): the attempt's own times give them.
    const local = workloadView(
      workload({
        phase: "FAILED",
        reason: "TIME_LIMIT_EXCEEDED",
        message: "killed by SIGTERM after its time limit of 60 s",
      }),
      [],
      [
        allocation({
          phase: "FAILED",
          startedAt: 10_000,
          deadlineAt: 70_000,
          endedAt: 70_400,
        }),
      ],
      80_000,
    );
    expect(local.hint).toBe("ran 0:01:00 of 0:01:00: raise timeLimitSeconds");
    // Any other message (another backend's words, another reason's explanation, figures with
    // no action) and no times leave the generic sentence.
    expect(hintFor("TIME_LIMIT_EXCEEDED", "killed by SIGTERM after its time limit of 60 s")).toBe(
      REASON_HINTS.TIME_LIMIT_EXCEEDED ?? "",
    );
    expect(hintFor("TIME_LIMIT_EXCEEDED", "OUT_OF_MEMORY: used 1 GiB: ask for more")).toBe(
      REASON_HINTS.TIME_LIMIT_EXCEEDED ?? "",
    );
    expect(hintFor("OUT_OF_MEMORY", "OUT_OF_MEMORY: used 1 GiB")).toBe(
      REASON_HINTS.OUT_OF_MEMORY ?? "",
    );
    expect(hintFor("NONZERO_EXIT", "NONZERO_EXIT: do this: and that")).toBe(
      REASON_HINTS.NONZERO_EXIT ?? "",
    );
  });
});
