import { afterEach, describe, expect, test } from "bun:test";
import { createWorkload, findAllocationByToken } from "../../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import type { SubmissionToken } from "../../src/core/models.ts";
import type {
  AllocationBackend,
  AllocationObservation,
} from "../../src/core/ports/allocation-backend.ts";
import {
  createReconciler,
  RECONCILER_FAULT_POINTS,
  type ReconcilerStore,
} from "../../src/core/reconciler/create-reconciler.ts";
import { systemTimers } from "../../src/lib/clock.ts";
import {
  type Harness,
  type HarnessOptions,
  harness,
  inertPreparer,
  recordSubmits,
} from "../support/reconciler-harness.ts";
import { isLiveJob } from "../support/simulated-backend.ts";

let open: Harness[] = [];
afterEach(() => {
  for (const h of open) h.close();
  open = [];
});
function make(options: HarnessOptions = {}): Harness {
  const h = harness(options);
  open.push(h);
  return h;
}

function onlyAllocation(h: Harness, id: string) {
  const all = h.allocations(id);
  expect(all).toHaveLength(1);
  return all[0]!;
}

describe("submission", () => {
  test("a new workload is minted, submitted and recorded in one tick, then follows the backend", async () => {
    const h = make();
    const id = h.addWorkload();
    const report = await h.tick();
    expect(report.attemptsMinted).toBe(1);
    expect(report.submitted).toBe(1);
    const a = onlyAllocation(h, id);
    expect(a.phase).toBe("QUEUED");
    expect(a.epoch).toBe(1);
    expect(a.handle).not.toBeNull();
    expect(h.workload(id)).toMatchObject({ phase: "QUEUED", executionEpoch: 1 });

    h.sim.start(a.handle!);
    await h.tick();
    expect(h.workload(id).phase).toBe("RUNNING");
    expect(onlyAllocation(h, id).startedAt).not.toBeNull();

    h.sim.finish(a.handle!, { phase: "COMPLETED", exitCode: 0 });
    await h.tick();
    expect(h.workload(id)).toMatchObject({
      phase: "COMPLETED",
      reason: "EXITED_ZERO",
      exitCode: 0,
    });
    expect(onlyAllocation(h, id)).toMatchObject({ phase: "COMPLETED", reason: "EXITED_ZERO" });
    expect(h.phases(id)).toEqual(["PENDING", "SUBMITTING", "QUEUED", "RUNNING", "COMPLETED"]);
  });

  test("the token is durable before submit is called", async () => {
    let seen = null as string | null;
    const h: Harness = make({
      sim: {
        onSubmit: (request) => {
          seen = findAllocationByToken(h.deps, request.token)?.phase ?? "MISSING";
        },
      },
    });
    h.addWorkload();
    await h.tick();
    expect(seen).toBe("SUBMITTING");
  });

  test("a nonzero exit fails the workload with the exit code", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    h.sim.finish(onlyAllocation(h, id).handle!, { phase: "FAILED", exitCode: 3 });
    await h.tick();
    expect(h.workload(id)).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
  });

  test("Rejected fails the workload cleanly with SUBMIT_REJECTED and the backend's message", async () => {
    const h = make();
    const id = h.addWorkload();
    h.sim.failNextSubmits("REJECT");
    await h.tick();
    // The attempt ends at once; the workload waits one back-off for its profile's verdict
    // (profile-breaker.ts), and with none it is its own refusal.
    expect(onlyAllocation(h, id).phase).toBe("FAILED");
    expect(h.workload(id)).toMatchObject({ phase: "PENDING", reason: "SUBMIT_REFUSED" });
    h.clock.advance(30_000);
    await h.tick();
    expect(h.workload(id)).toMatchObject({
      phase: "FAILED",
      reason: "SUBMIT_REJECTED",
      message: "simulated rejection",
    });
    await h.tick();
    expect(h.sim.calls.submit).toBe(1);
  });

  test("Unknown without a job: the next tick asks by token, and only Absent re-submits the same token", async () => {
    const h = make({ sim: { lookupBeforeSubmit: false } });
    const id = h.addWorkload();
    h.sim.failNextSubmits("UNKNOWN_WITHOUT_CREATE");
    await h.tick();
    const first = onlyAllocation(h, id);
    expect(first).toMatchObject({ phase: "SUBMITTING", reason: "SUBMIT_UNKNOWN", handle: null });
    expect(h.sim.jobs()).toHaveLength(0);

    h.sim.resetCalls();
    await h.tick();
    expect(h.sim.log.map((c) => c.op)).toEqual(["findByToken", "submit"]);
    const after = onlyAllocation(h, id);
    expect(after.id).toBe(first.id);
    expect(after.token).toBe(first.token);
    expect(after.phase).toBe("QUEUED");
    expect(h.sim.jobsByToken(first.token)).toHaveLength(1);
  });

  test("Unknown after the job was created: the token lookup finds it and nothing is submitted again", async () => {
    const h = make({ sim: { lookupBeforeSubmit: false } });
    const id = h.addWorkload();
    h.sim.failNextSubmits("UNKNOWN_AFTER_CREATE");
    await h.tick();
    expect(h.sim.jobs()).toHaveLength(1);
    h.sim.resetCalls();
    await h.tick();
    expect(h.sim.calls.submit).toBe(0);
    const a = onlyAllocation(h, id);
    expect(a.handle).toBe(h.sim.jobs()[0]!.handle);
    expect(h.workload(id).phase).toBe("QUEUED");
  });

  test("a token lookup that cannot answer is not an answer of absence", async () => {
    const h = make({ sim: { lookupBeforeSubmit: false } });
    const id = h.addWorkload();
    h.sim.failNextSubmits("UNKNOWN_WITHOUT_CREATE");
    await h.tick();
    h.sim.setAvailable(false);
    for (let i = 0; i < 3; i++) await h.tick();
    h.sim.setThrowing("findByToken", true);
    h.sim.setAvailable(true);
    await h.tick();
    expect(h.sim.calls.submit).toBe(1);
    expect(onlyAllocation(h, id).phase).toBe("SUBMITTING");
    h.sim.setThrowing("findByToken", false);
    await h.tick();
    expect(h.sim.calls.submit).toBe(2);
    expect(onlyAllocation(h, id).phase).toBe("QUEUED");
  });

  test("Existing (the first try landed after the lookup said Absent) records that job's handle", async () => {
    const h = make({ sim: { lookupBeforeSubmit: true } });
    // A lookup racing a late landing: findByToken says Absent once, though the job exists.
    let lie = false;
    const racing = {
      ...h.sim.backend,
      findByToken: async (tokens: readonly SubmissionToken[]) => {
        const real = await h.sim.backend.findByToken(tokens);
        if (!lie) return real;
        lie = false;
        return new Map(tokens.map((t) => [t, { kind: "Absent" } as const]));
      },
    };
    const id = h.addWorkload();
    h.sim.failNextSubmits("UNKNOWN_AFTER_CREATE");
    await h.tick();
    lie = true;
    const reconciler = createReconciler({
      timers: systemTimers,
      store: bindReconcilerStore(h.deps),
      backend: racing,
      preparer: inertPreparer,
      clock: h.clock,
      log: h.log,
    });
    await reconciler.reconcileOnce();
    const a = onlyAllocation(h, id);
    expect(a.phase).toBe("QUEUED");
    expect(a.handle).toBe(h.sim.jobs()[0]!.handle);
    expect(a.message).toContain("already submitted");
    expect(h.sim.jobs()).toHaveLength(1);
  });

  test("a corrupted stored spec stops the tick before any backend call or write", async () => {
    const h = make();
    const good = h.addWorkload();
    const broken = h.addWorkload();
    h.deps.db.$client.run("UPDATE workloads SET spec_json = '{broken' WHERE id = ?", [broken]);
    await expect(h.tick()).rejects.toThrow();
    expect(h.sim.calls.submit).toBe(0);
    expect(h.sim.calls.observe).toBe(0);
    expect(h.allocations(good)).toHaveLength(0);
    expect(h.allocations(broken)).toHaveLength(0);
  });

  test("a preparer refusal fails the workload without submitting", async () => {
    const h = make({
      preparer: {
        prepare: async () => ({
          kind: "Refused",
          reason: "ISOLATION_UNAVAILABLE",
          message: "no isolation",
        }),
      },
    });
    const id = h.addWorkload();
    await h.tick();
    expect(h.workload(id)).toMatchObject({ phase: "FAILED", reason: "ISOLATION_UNAVAILABLE" });
    expect(onlyAllocation(h, id)).toMatchObject({
      phase: "FAILED",
      reason: "ISOLATION_UNAVAILABLE",
    });
    expect(h.sim.calls.submit).toBe(0);
  });

  test("a preparer that runs out of disk (ENOSPC) ends the attempt as SPOOL_FULL, not retried blind", async () => {
    const h = make({
      preparer: {
        prepare: async () => {
          throw Object.assign(new Error("ENOSPC: no space left on device, mkdir '/spool/w'"), {
            code: "ENOSPC",
          });
        },
      },
    });
    const id = h.addWorkload();
    await h.tick();
    expect(h.workload(id)).toMatchObject({ phase: "FAILED", reason: "SPOOL_FULL" });
    expect(onlyAllocation(h, id)).toMatchObject({ phase: "FAILED", reason: "SPOOL_FULL" });
    expect(onlyAllocation(h, id).message).toContain("no space left");
    expect(h.sim.calls.submit).toBe(0);
  });

  test("a preparer that throws leaves the attempt SUBMITTING; the next tick submits it, same token, no lookup", async () => {
    let fail = true;
    const h = make({
      preparer: {
        prepare: async (w, a) => {
          if (fail) throw new Error("disk full");
          return {
            kind: "Prepared",
            attempt: {
              launch: { kind: "COMMAND", command: ["true"], env: {} },
              allocationDir: `/x/${a.id}`,
              workspaceDir: `/x/${w.id}`,
              timeLimitSeconds: null,
            },
          };
        },
      },
    });
    const id = h.addWorkload();
    await h.tick();
    expect(onlyAllocation(h, id).phase).toBe("SUBMITTING");
    expect(h.sim.calls.submit).toBe(0);
    fail = false;
    await h.tick();
    // The token was never handed to the backend: this process submits it without a lookup
    // (a lookup could only answer Absent), with the same token.
    expect(h.sim.calls.findByToken).toBe(0);
    expect(h.sim.calls.submit).toBe(1);
    expect(onlyAllocation(h, id).phase).toBe("QUEUED");
  });

  test("a preparer that says not yet leaves the attempt SUBMITTING, unsubmitted, until it may go", async () => {
    let ready = false;
    const h = make({
      preparer: {
        prepare: async (w, a) =>
          ready
            ? {
                kind: "Prepared",
                attempt: {
                  launch: { kind: "COMMAND", command: ["true"], env: {} },
                  allocationDir: `/x/${a.id}`,
                  workspaceDir: `/x/${w.id}`,
                  timeLimitSeconds: null,
                },
              }
            : { kind: "NotYet", message: "the nodes' sandbox is not checked yet" },
      },
    });
    const id = h.addWorkload();
    for (let i = 0; i < 3; i += 1) await h.tick();
    expect(onlyAllocation(h, id)).toMatchObject({ phase: "SUBMITTING", handle: null });
    expect(h.sim.calls.submit).toBe(0);
    ready = true;
    await h.tick();
    expect(h.sim.calls.findByToken).toBe(0);
    expect(h.sim.calls.submit).toBe(1);
    expect(onlyAllocation(h, id).phase).toBe("QUEUED");
  });
});

describe("what the submission carries", () => {
  test("a workload's asked resources reach the backend's submit; none asked, none sent", async () => {
    // Guards the spread into the SubmitRequest: dropped, a job asking 2 CPUs would run
    // with the profile's default and nobody would be told.
    const h = make();
    const sent = recordSubmits(h);
    const resources = { cpus: 2, memoryMb: 300 };
    createWorkload(h.deps, {
      id: "w-sized",
      kind: "BATCH",
      name: "w-sized",
      profile: "default",
      spec: { command: ["true"], resources },
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
    });
    const plain = h.addWorkload();
    await h.tick();
    const byWorkload = new Map(sent.map((r) => [r.workloadId, r]));
    expect(byWorkload.get("w-sized")?.resources).toEqual(resources);
    expect(byWorkload.get(plain)).toBeDefined();
    expect("resources" in (byWorkload.get(plain) ?? {})).toBe(false);
  });
});

describe("fault points", () => {
  test("a crash at each named point is survived by a fresh reconciler on the same store", async () => {
    for (const point of RECONCILER_FAULT_POINTS) {
      const h = make({ sim: { lookupBeforeSubmit: false } });
      const running = h.addWorkload();
      await h.tick();
      h.sim.start(onlyAllocation(h, running).handle!);
      const fresh = h.addWorkload();
      h.stop(running);
      const seen: string[] = [];
      const dying = createReconciler({
        timers: systemTimers,
        store: bindReconcilerStore(h.deps),
        backend: h.sim.backend,
        preparer: inertPreparer,
        clock: h.clock,
        log: h.log,
        faultPoint: (name) => {
          seen.push(name);
          if (name === point) throw new Error(`killed at ${name}`);
        },
      });
      await expect(dying.reconcileOnce()).rejects.toThrow(`killed at ${point}`);
      expect(seen).toContain(point);
      h.restart();
      for (let i = 0; i < 4; i++) await h.tick();
      expect(h.workload(running).phase).toBe("CANCELLED");
      expect(h.workload(fresh).phase).toBe("QUEUED");
      expect(h.sim.jobs().filter(isLiveJob)).toHaveLength(1);
      expect(h.sim.jobsByToken(onlyAllocation(h, fresh).token)).toHaveLength(1);
    }
  });
});

describe("unavailability", () => {
  test("an unavailable backend changes no phase and starts no attempt", async () => {
    const h = make();
    const running = h.addWorkload();
    await h.tick();
    h.sim.start(onlyAllocation(h, running).handle!);
    await h.tick();
    const waiting = h.addWorkload();
    h.sim.setAvailable(false);
    for (let i = 0; i < 5; i++) {
      const report = await h.tick();
      expect(report.backendUnavailable).toBe(true);
    }
    expect(h.workload(running).phase).toBe("RUNNING");
    expect(h.workload(waiting).phase).toBe("PENDING");
    expect(h.allocations(waiting)).toHaveLength(0);
    h.sim.setAvailable(true);
    await h.tick();
    expect(h.workload(waiting).phase).toBe("QUEUED");
  });

  test("a backend that throws is treated as unavailable, not as a crash of the tick", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    h.sim.setThrowing("observe", true);
    h.sim.lose(onlyAllocation(h, id).handle!);
    const report = await h.tick();
    expect(report.backendUnavailable).toBe(true);
    expect(report.error).toBeNull();
    expect(h.workload(id).phase).toBe("QUEUED");
    expect(h.log.lines.some((l) => l.includes("backend call threw"))).toBe(true);
  });

  test("a phase no backend can observe (PENDING, SUBMITTING) is ignored, not followed", async () => {
    // Guards isObservablePhase: followed, a backend's "PENDING" would move a queued attempt
    // back to a phase that means "not submitted yet", and the next tick would submit it again.
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    const a = onlyAllocation(h, id);
    const backend = h.sim.backend as { observe: AllocationBackend["observe"] };
    const real = backend.observe.bind(h.sim.backend);
    for (const phase of ["PENDING", "SUBMITTING"] as const) {
      backend.observe = async (targets) => {
        const seen = await real(targets);
        if (seen.kind !== "Observed") return seen;
        const rewritten = new Map<string, AllocationObservation>();
        for (const [k, o] of seen.observations) {
          rewritten.set(k, o.kind === "Observed" ? { ...o, phase } : o);
        }
        return { ...seen, observations: rewritten };
      };
      await h.tick();
      expect(h.workload(id).phase).toBe("QUEUED");
      expect(onlyAllocation(h, id)).toMatchObject({ id: a.id, phase: "QUEUED" });
    }
    expect(h.sim.jobs()).toHaveLength(1);
    expect(h.log.lines.some((l) => l.includes("a phase it cannot observe"))).toBe(true);
  });

  test("Indeterminate never becomes LOST", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    h.sim.setIndeterminate(onlyAllocation(h, id).handle!, true);
    for (let i = 0; i < 3; i++) await h.tick();
    expect(h.workload(id).phase).toBe("QUEUED");
  });
});

describe("recovery", () => {
  test("a lost attempt with attempts left gets a new epoch and a new token, never a replay", async () => {
    const h = make();
    const id = h.addWorkload({ maxAttempts: 2 });
    await h.tick();
    const first = onlyAllocation(h, id);
    h.sim.lose(first.handle!);
    await h.tick();
    expect(h.workload(id)).toMatchObject({
      phase: "PENDING",
      reason: "RETRYING",
      executionEpoch: 1,
    });
    await h.tick();
    const [a1, a2] = h.allocations(id);
    expect(a1).toMatchObject({ phase: "LOST", reason: "NOT_FOUND_BY_BACKEND", epoch: 1 });
    expect(a2).toMatchObject({ phase: "QUEUED", epoch: 2 });
    expect(a2!.token).not.toBe(a1!.token);
    expect(h.workload(id).executionEpoch).toBe(2);

    h.sim.lose(a2!.handle!);
    await h.tick();
    expect(h.workload(id)).toMatchObject({ phase: "LOST", reason: "NOT_FOUND_BY_BACKEND" });
    await h.tick();
    expect(h.allocations(id)).toHaveLength(2);
  });

  test("NODE_FAILURE and PREEMPTED recover; a plain failure does not", async () => {
    const h = make();
    const node = h.addWorkload({ maxAttempts: 3 });
    const preempted = h.addWorkload({ maxAttempts: 3 });
    const plain = h.addWorkload({ maxAttempts: 3 });
    await h.tick();
    h.sim.finish(onlyAllocation(h, node).handle!, { phase: "FAILED", reason: "NODE_FAILURE" });
    h.sim.finish(onlyAllocation(h, preempted).handle!, { phase: "FAILED", reason: "PREEMPTED" });
    h.sim.finish(onlyAllocation(h, plain).handle!, { phase: "FAILED", exitCode: 1 });
    await h.tick();
    await h.tick();
    expect(h.allocations(node)).toHaveLength(2);
    expect(h.allocations(preempted)).toHaveLength(2);
    expect(h.workload(plain)).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT" });
    expect(h.allocations(plain)).toHaveLength(1);
  });

  test("without attempts left the workload takes the attempt's phase and reason", async () => {
    const h = make();
    const id = h.addWorkload({ maxAttempts: 1 });
    await h.tick();
    h.sim.finish(onlyAllocation(h, id).handle!, { phase: "FAILED", reason: "NODE_FAILURE" });
    await h.tick();
    expect(h.workload(id)).toMatchObject({ phase: "FAILED", reason: "NODE_FAILURE" });
  });
});

describe("cancel barrier", () => {
  test("a PENDING workload is cancelled without touching the backend", async () => {
    const h = make();
    const id = h.addWorkload();
    h.stop(id);
    const report = await h.tick();
    expect(h.workload(id)).toMatchObject({ phase: "CANCELLED", reason: "USER_CANCELLED" });
    expect(report.backendCallsTotal).toBe(0);
  });

  test("a running workload is fenced, released, and marked only once the backend says it ended", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    h.sim.start(onlyAllocation(h, id).handle!);
    await h.tick();
    h.sim.setCancelLagSteps(3);
    h.stop(id);
    await h.tick();
    expect(h.workload(id).phase).toBe("STOPPING");
    expect(onlyAllocation(h, id).phase).toBe("STOPPING");
    await h.tick();
    expect(h.workload(id).phase).toBe("STOPPING");
    expect(h.sim.jobs().filter(isLiveJob)).toHaveLength(1);
    for (let i = 0; i < 3; i++) await h.tick();
    expect(h.sim.jobs().filter(isLiveJob)).toHaveLength(0);
    expect(h.workload(id)).toMatchObject({ phase: "CANCELLED", reason: "USER_CANCELLED" });
    expect(onlyAllocation(h, id)).toMatchObject({ phase: "CANCELLED", reason: "USER_CANCELLED" });
    expect(h.phases(id)).toEqual([
      "PENDING",
      "SUBMITTING",
      "QUEUED",
      "RUNNING",
      "STOPPING",
      "CANCELLED",
    ]);
  });

  test("the stop reason given to requestStop is the workload's terminal reason", async () => {
    const h = make();
    const id = h.addWorkload({ kind: "SESSION" });
    await h.tick();
    h.stop(id, "IDLE_TIMEOUT", "idle for 3600 s");
    await h.tick();
    await h.tick();
    expect(h.workload(id)).toMatchObject({
      phase: "CANCELLED",
      reason: "IDLE_TIMEOUT",
      message: "idle for 3600 s",
    });
  });

  test("an unresolved submission that did land is found by token and cancelled", async () => {
    const h = make({ sim: { lookupBeforeSubmit: false } });
    const id = h.addWorkload();
    h.sim.failNextSubmits("UNKNOWN_AFTER_CREATE");
    await h.tick();
    h.stop(id);
    await h.tick();
    expect(onlyAllocation(h, id).handle).toBe(h.sim.jobs()[0]!.handle);
    await h.tick();
    expect(h.sim.jobs().filter(isLiveJob)).toHaveLength(0);
    expect(h.workload(id).phase).toBe("CANCELLED");
    expect(h.sim.calls.submit).toBe(1);
  });

  test("an unresolved submission that never landed ends CANCELLED on a definite Absent only", async () => {
    const h = make({ sim: { lookupBeforeSubmit: false } });
    const id = h.addWorkload();
    h.sim.failNextSubmits("UNKNOWN_WITHOUT_CREATE");
    await h.tick();
    h.stop(id);
    h.sim.setAvailable(false);
    await h.tick();
    expect(h.workload(id).phase).toBe("STOPPING");
    h.sim.setAvailable(true);
    await h.tick();
    expect(h.workload(id).phase).toBe("CANCELLED");
    expect(onlyAllocation(h, id).phase).toBe("CANCELLED");
    expect(h.sim.calls.submit).toBe(1);
  });

  test("stages run in order: fence is durable before cancelTasks; nothing is released until drained", async () => {
    const order: string[] = [];
    let drained = false;
    const h: Harness = make({
      barrierHooks: {
        cancelTasks: async (w) => {
          order.push(`cancelTasks:${h.workload(w.id).phase}`);
        },
        drained: async () => {
          order.push(`drained:${drained}`);
          return drained;
        },
      },
    });
    const id = h.addWorkload();
    await h.tick();
    h.stop(id);
    h.sim.resetCalls();
    await h.tick();
    expect(order).toEqual(["cancelTasks:STOPPING", "drained:false"]);
    expect(h.sim.calls.cancel).toBe(0);
    drained = true;
    await h.tick();
    expect(h.sim.calls.cancel).toBe(1);
    expect(h.workload(id).phase).toBe("STOPPING");
    await h.tick();
    expect(h.workload(id).phase).toBe("CANCELLED");
  });

  test("the barrier converges when run again after dying at any store write", async () => {
    for (let crashAt = 1; crashAt <= 4; crashAt++) {
      let writes = 0;
      let armed = false;
      const crashing = (inner: ReconcilerStore): ReconcilerStore => {
        const step = () => {
          if (armed && ++writes === crashAt) throw new Error("crash");
        };
        return {
          loadView: () => inner.loadView(),
          parentStates: (ids) => inner.parentStates(ids),
          decodeSpecs: (w) => inner.decodeSpecs(w),
          findAllocationsByTokens: (t) => inner.findAllocationsByTokens(t),
          mintAttempts: (i) => {
            step();
            return inner.mintAttempts(i);
          },
          applyTransitions: (ts) => {
            step();
            return inner.applyTransitions(ts);
          },
          markAcknowledged: (id) => {
            step();
            inner.markAcknowledged(id);
          },
        };
      };
      const h = make({ wrapStore: crashing });
      const id = h.addWorkload();
      await h.tick();
      h.sim.start(onlyAllocation(h, id).handle!);
      await h.tick();
      h.stop(id);
      armed = true;
      for (let i = 0; i < 6; i++) {
        try {
          await h.tick();
        } catch {
          h.restart();
        }
      }
      expect(h.workload(id).phase).toBe("CANCELLED");
      expect(h.sim.jobs().filter(isLiveJob)).toHaveLength(0);
    }
  });
});

describe("batching", () => {
  test("at most one call per backend operation per tick, whatever the number of workloads", async () => {
    const h = make({ sim: { lookupBeforeSubmit: false } });
    const ids = Array.from({ length: 40 }, (_, i) =>
      h.addWorkload({ maxAttempts: i % 2 === 0 ? 2 : 1 }),
    );
    h.sim.failNextSubmits(
      ...Array.from({ length: 10 }, (_, i) =>
        i % 2 === 0 ? ("UNKNOWN_AFTER_CREATE" as const) : ("UNKNOWN_WITHOUT_CREATE" as const),
      ),
    );
    for (let round = 0; round < 6; round++) {
      h.sim.resetCalls();
      const report = await h.tick();
      for (const op of ["observe", "findByToken", "submit", "cancel"] as const) {
        expect(h.sim.calls[op]).toBeLessThanOrEqual(1);
        expect(report.backendCalls[op]).toBe(h.sim.calls[op]);
      }
      for (const j of h.sim.jobs().slice(0, 5)) if (isLiveJob(j)) h.sim.lose(j.handle);
      for (const id of ids.slice(30, 35)) h.stop(id);
    }
  });

  test("a steady tick writes nothing", async () => {
    const h = make();
    for (let i = 0; i < 5; i++) h.addWorkload();
    await h.tick();
    for (const j of h.sim.jobs()) h.sim.start(j.handle);
    await h.tick();
    const report = await h.tick();
    expect(report.writes).toBe(0);
    expect(report.backendCalls.observe).toBe(1);
    expect(report.workloadsConsidered).toBe(5);
  });
});

describe("acknowledgement sweep", () => {
  function facts(h: Harness): Promise<readonly { token: SubmissionToken }[]> {
    const pending = h.sim.backend.capabilities.terminalFacts?.pendingTerminalFacts();
    if (pending === undefined)
      throw new Error("the simulated backend was made without acknowledger");
    return pending;
  }

  test("a lost attempt's fact is kept until the workload is on a later epoch", async () => {
    const acked: SubmissionToken[] = [];
    const h = make({ sim: { acknowledger: true, onAcknowledge: (t) => acked.push(t) } });
    const id = h.addWorkload({ maxAttempts: 2 });
    await h.tick();
    const first = onlyAllocation(h, id);
    h.sim.lose(first.handle!);
    await h.tick();
    expect(h.workload(id).phase).toBe("PENDING");
    expect(acked).toEqual([]);
    await h.tick();
    expect(h.workload(id).executionEpoch).toBe(2);
    expect(acked).toEqual([first.token]);
    expect(h.allocations(id)[0]!.acknowledgedAt).not.toBeNull();
    expect(await facts(h)).toEqual([]);
  });

  test("a terminal workload's fact is acknowledged at the end of the tick that ended it", async () => {
    const acked: SubmissionToken[] = [];
    const h = make({ sim: { acknowledger: true, onAcknowledge: (t) => acked.push(t) } });
    const id = h.addWorkload();
    await h.tick();
    const a = onlyAllocation(h, id);
    h.sim.finish(a.handle!, { phase: "COMPLETED", exitCode: 0 });
    await h.tick();
    expect(acked).toEqual([a.token]);
  });

  test("a fact for a token the store does not know is left alone and logged once", async () => {
    const h = make({ sim: { acknowledger: true } });
    const stranger = "o4s-aaaaaaaaaaaaaaaaaaaaaaaaaa" as SubmissionToken;
    const job = await h.sim.backend.submit([
      {
        allocationId: "x",
        workloadId: "x",
        workloadKind: "BATCH",
        token: stranger,
        epoch: 1,
        profile: "default",
        name: "x",
        launch: { kind: "COMMAND", command: ["true"], env: {} },
        timeLimitSeconds: null,
        allocationDir: "/x",
        workspaceDir: "/x",
      },
    ]);
    const created = job.get(stranger);
    if (created?.kind !== "Created") throw new Error("not created");
    h.sim.finish(created.handle, { phase: "COMPLETED" });
    await h.tick();
    await h.tick();
    expect((await facts(h)).map((f) => f.token)).toEqual([stranger]);
    expect(h.log.lines.filter((l) => l.includes("does not know")).length).toBe(1);
  });

  test("the first tick sweeps before anything else, so a dying tick still acknowledges", async () => {
    const acked: SubmissionToken[] = [];
    let failViews = false;
    const h = make({
      sim: { acknowledger: true, onAcknowledge: (t) => acked.push(t) },
      wrapStore: (inner) => ({
        ...inner,
        loadView: () => {
          if (failViews) throw new Error("store down");
          return inner.loadView();
        },
        loadViewChanges: () => {
          if (failViews) throw new Error("store down");
          return inner.loadViewChanges?.() ?? { items: new Map(), changed: [], rebuilt: true };
        },
      }),
    });
    const id = h.addWorkload();
    await h.tick();
    const a = onlyAllocation(h, id);
    h.sim.finish(a.handle!, { phase: "COMPLETED" });
    // The ending is committed but this process dies before its end-of-tick sweep.
    h.sim.setThrowing("pendingTerminalFacts", true);
    await h.tick();
    expect(h.workload(id).phase).toBe("COMPLETED");
    expect(acked).toEqual([]);
    h.sim.setThrowing("pendingTerminalFacts", false);
    h.restart();
    failViews = true;
    await expect(h.tick()).rejects.toThrow("store down");
    expect(acked).toEqual([a.token]);
  });
});

describe("looking only at what changed", () => {
  /** Targets of the observe calls made since `from` in the simulated backend's log. */
  const observedTargets = (h: Harness, from: number) =>
    h.sim.log.slice(from).flatMap((c) => (c.op === "observe" ? [c.targets.length] : []));

  test("with a change-reporting backend a steady tick observes only what changed; a full tick still comes", async () => {
    const h = make({ sim: { reportsChanges: true } });
    const ids = [1, 2, 3, 4, 5].map(() => h.addWorkload());
    await h.tick(); // first load: full; mints and submits all five
    await h.tick(); // their handles were written: observed once each
    for (const id of ids) expect(h.workload(id).phase).toBe("QUEUED");
    const [first, ...rest] = ids;
    if (first === undefined) throw new Error("no workload");
    const started = onlyAllocation(h, first);
    if (started.handle === null) throw new Error("no handle");
    h.sim.start(started.handle);
    let from = h.sim.log.length;
    await h.tick();
    // Nothing in the store changed: no target; the start came through the change feed.
    expect(observedTargets(h, from)).toEqual([0]);
    expect(h.workload(first).phase).toBe("RUNNING");
    for (const id of rest) expect(h.workload(id).phase).toBe("QUEUED");
    from = h.sim.log.length;
    await h.tick(); // the workload written last tick is looked at again, alone
    expect(observedTargets(h, from)).toEqual([1]);
    h.clock.advance(60_000);
    from = h.sim.log.length;
    await h.tick(); // the safety net: every live workload observed
    expect(observedTargets(h, from)).toEqual([5]);
  });

  test("a tick that dies before writing what the feed reported leaves it for the next tick", async () => {
    let failWrites = false;
    const h = make({
      sim: { reportsChanges: true },
      wrapStore: (inner) => ({
        ...inner,
        applyTransitions: (ts) => {
          if (failWrites) throw new Error("store down");
          return inner.applyTransitions(ts);
        },
      }),
    });
    const id = h.addWorkload();
    await h.tick();
    await h.tick();
    const a = onlyAllocation(h, id);
    if (a.handle === null) throw new Error("no handle");
    h.sim.start(a.handle);
    failWrites = true;
    await expect(h.tick()).rejects.toThrow("store down");
    failWrites = false;
    await h.tick(); // the same reconciler: the start must not be lost with the failed tick
    expect(h.workload(id).phase).toBe("RUNNING");
  });

  test("a change the backend reports for an older attempt is not taken for the current one", async () => {
    const h = make({ sim: { reportsChanges: true } });
    const id = h.addWorkload({ maxAttempts: 2 });
    await h.tick();
    await h.tick();
    const lost = onlyAllocation(h, id);
    if (lost.handle === null) throw new Error("no handle");
    h.sim.lose(lost.handle);
    await h.tick(); // LOST, attempts left: back to PENDING (RETRYING)
    await h.tick(); // attempt 2 minted and submitted
    await h.tick();
    const second = h.allocations(id).find((a) => a.epoch === 2);
    expect(second?.phase).toBe("QUEUED");
    // The first attempt's job is reported changed again (still LOST): attempt 2 must stay
    // as it is, not be ended by its predecessor's news.
    h.sim.setIndeterminate(lost.handle, false);
    await h.tick();
    expect(h.allocations(id).find((a) => a.epoch === 2)?.phase).toBe("QUEUED");
    expect(h.workload(id).phase).toBe("QUEUED");
  });
});
