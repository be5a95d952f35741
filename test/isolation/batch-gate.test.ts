/**
 * BATCH fails closed (issue 18): a daemon whose jobs keep its own uid refuses BATCH while no
 * verified sandbox wraps its launches, unless the admin opted in. The rule, its decorator
 * (which follows the backend's launchesSandboxed() of the moment: a cluster's sandbox is
 * switched on once the nodes verify) and the preparer behind the same gate.
 */
import { describe, expect, test } from "bun:test";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import {
  gatedBatchPreparer,
  gatedUnsandboxedBatch,
  unsandboxedBatchRefusal,
} from "../../src/core/isolation/batch-gate.ts";
import type { Allocation, Workload } from "../../src/core/models.ts";
import { batchRefusal } from "../../src/core/ports/allocation-backend.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const closed = { jobsKeepDaemonUid: true, allowUnsandboxedBatch: false };

describe("unsandboxed BATCH as the daemon's uid", () => {
  test("is refused, naming the opt-in flag; every other combination is placed", () => {
    expect(unsandboxedBatchRefusal(closed, false)).toContain("--allow-unsandboxed-batch");
    expect(unsandboxedBatchRefusal(closed, true)).toBeNull();
    expect(unsandboxedBatchRefusal({ ...closed, allowUnsandboxedBatch: true }, false)).toBeNull();
    expect(unsandboxedBatchRefusal({ ...closed, jobsKeepDaemonUid: false }, false)).toBeNull();
  });

  test("the gate follows the backend's sandbox as it switches on", () => {
    let sandboxing = false;
    const backend = gatedUnsandboxedBatch(
      fakeBackend({ capabilities: { launchSandbox: { launchesSandboxed: () => sandboxing } } }),
      closed,
    );
    expect(batchRefusal(backend)).not.toBeNull();
    sandboxing = true;
    expect(batchRefusal(backend)).toBeNull();
  });

  test("a backend that does not say whether it sandboxes counts as unsandboxed", () => {
    expect(batchRefusal(gatedUnsandboxedBatch(fakeBackend(), closed))).not.toBeNull();
  });

  test("the BATCH preparer throws (retried later, nothing lost) while the gate is closed", async () => {
    let prepared = 0;
    const inner: AttemptPreparer = {
      prepare: async () => {
        prepared += 1;
        return { kind: "Refused", reason: "INTERNAL_ERROR", message: "reached" };
      },
    };
    let sandboxing = false;
    const backend = gatedUnsandboxedBatch(
      fakeBackend({ capabilities: { launchSandbox: { launchesSandboxed: () => sandboxing } } }),
      closed,
    );
    const preparer = gatedBatchPreparer(inner, backend);
    const workload = { id: "w", kind: "BATCH" } as Workload;
    const allocation = { id: "a" } as Allocation;
    await expect(preparer.prepare(workload, allocation)).rejects.toThrow(
      /BATCH not started: .*--allow-unsandboxed-batch/,
    );
    expect(prepared).toBe(0);
    sandboxing = true;
    expect((await preparer.prepare(workload, allocation)).kind).toBe("Refused");
    expect(prepared).toBe(1);
  });
});
