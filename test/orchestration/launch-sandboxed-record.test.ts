/**
 * An allocation is recorded as launched in the verified sandbox only when this daemon's own
 * submit created it through the sandboxed path. An `Existing` answer (an earlier submit whose
 * answer was lost, perhaps by a daemon started without the sandbox) is unknown, so recorded
 * as not sandboxed: SESSION admission refuses while such a job is live beside it.
 */
import { describe, expect, test } from "bun:test";
import { listUnsandboxedLiveAllocations } from "../../src/adapters/store-sqlite/ops/list-unsandboxed-live-allocations.ts";
import { externalHandle } from "../../src/core/models.ts";
import { recordSubmitResult } from "../../src/core/reconciler/submit-decisions.ts";
import { harnessPerTest } from "../support/reconciler-harness.ts";

const make = harnessPerTest();

describe("which submissions are recorded as sandboxed", () => {
  test("the decision: Created through a sandboxed launch only, never Existing", () => {
    const h = make();
    const { id, attempt } = h.admit({ handOver: false });
    const w = h.workload(id);
    const handle = externalHandle("job-1");
    const token = attempt.token;
    const sandboxedOf = (kind: "Created" | "Existing", sandboxed: boolean) =>
      recordSubmitResult(w, attempt, { kind, token, handle }, 0, sandboxed).allocation
        ?.launchSandboxed;
    expect(sandboxedOf("Created", true)).toBe(true);
    expect(sandboxedOf("Created", false)).toBe(false);
    expect(sandboxedOf("Existing", true)).toBe(false);
  });

  test("a job found Existing on resubmit blocks sessions even from a sandboxing backend", async () => {
    const h = make({ sim: { capabilities: { launchSandbox: { launchesSandboxed: () => true } } } });
    const created = h.addWorkload();
    await h.tick();
    expect(h.allocations(created)[0]?.phase).toBe("QUEUED");
    expect(listUnsandboxedLiveAllocations(h.deps, 10)).toEqual([]);

    // The job is created but the answer is lost; a lookup that raced the submission says
    // Absent, so the resubmit of the same token answers Existing.
    h.sim.failNextSubmits("UNKNOWN_AFTER_CREATE");
    h.sim.backend.findByToken = async (tokens) =>
      new Map(tokens.map((t) => [t, { kind: "Absent" } as const]));
    const found = h.addWorkload();
    for (let i = 0; i < 5 && h.allocations(found)[0]?.phase !== "QUEUED"; i++) await h.tick();
    const answers = h.sim.log.flatMap((c) => (c.op === "submit" ? c.answers : []));
    expect(answers.map((a) => a.kind)).toEqual(["Created", "Unknown", "Existing"]);
    const [allocation] = h.allocations(found);
    expect(allocation?.phase).toBe("QUEUED");
    expect(listUnsandboxedLiveAllocations(h.deps, 10)).toEqual([allocation?.id ?? ""]);
  });
});
