/**
 * Runway in the reconciler: the backend's end time is stored per allocation when it is first
 * seen running, and a TIME_LIMIT_NEAR event is written once, by the injected clock, when the
 * allocation comes within its profile's warning time of that end.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { listEvents } from "../../src/adapters/store-sqlite/index.ts";
import type { Allocation, ResourceProfile } from "../../src/core/models.ts";
import {
  DEFAULT_WARN_BEFORE_LIMIT_SECONDS,
  warningLeads,
  warnNearDeadline,
} from "../../src/core/reconciler/runway.ts";
import {
  type Harness,
  type HarnessOptions,
  harness,
  inertPreparerWithLimit,
} from "../support/reconciler-harness.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

function profile(warnBeforeLimitSeconds?: number): ResourceProfile {
  return {
    name: "default",
    description: "test",
    kinds: ["BATCH", "SESSION"],
    resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: null },
    ...(warnBeforeLimitSeconds === undefined ? {} : { warnBeforeLimitSeconds }),
  };
}

function make(limitSeconds: number, options: HarnessOptions = {}): Harness {
  const h = harness({ preparer: inertPreparerWithLimit(limitSeconds), ...options });
  open.push(h);
  return h;
}

function only(h: Harness, id: string): Allocation {
  const all = h.allocations(id);
  expect(all).toHaveLength(1);
  return all[0] as Allocation;
}

const warnings = (h: Harness, id: string) =>
  listEvents(h.deps, id).filter((e) => e.reason === "TIME_LIMIT_NEAR");

/** A workload whose one attempt runs, with its deadline stored; returns id and deadline. */
async function running(h: Harness): Promise<{ id: string; deadlineAt: number }> {
  const id = h.addWorkload();
  await h.tick();
  const handle = only(h, id).handle;
  if (handle === null) throw new Error("not submitted");
  h.sim.start(handle);
  await h.tick();
  const a = only(h, id);
  expect(a.phase).toBe("RUNNING");
  if (a.deadlineAt === null) throw new Error("no deadline stored");
  return { id, deadlineAt: a.deadlineAt };
}

describe("runway in the reconciler", () => {
  test("the backend's end time is stored when the attempt is first seen running, with no event", async () => {
    const h = make(3_600);
    const { id, deadlineAt } = await running(h);
    const a = only(h, id);
    expect(deadlineAt).toBe((a.startedAt as number) + 3_600_000);
    expect(a.deadlineWarnedAt).toBeNull();
    expect(h.phases(id)).toEqual(["PENDING", "SUBMITTING", "QUEUED", "RUNNING"]);
    // A steady tick writes nothing more.
    const events = listEvents(h.deps, id).length;
    const report = await h.tick();
    expect(report.writes).toBe(0);
    expect(listEvents(h.deps, id)).toHaveLength(events);
  });

  test("one TIME_LIMIT_NEAR event, once the default warning time before the end has come", async () => {
    const h = make(3_600);
    const { id, deadlineAt } = await running(h);
    const leadMs = DEFAULT_WARN_BEFORE_LIMIT_SECONDS * 1000;
    // One tick short of the warning time: nothing yet (h.tick advances the clock by 1 s).
    h.clock.set(deadlineAt - leadMs - 2_000);
    const before = h.workload(id);
    await h.tick();
    expect(warnings(h, id)).toHaveLength(0);
    await h.tick();
    const [warning, ...more] = warnings(h, id);
    expect(more).toHaveLength(0);
    expect(warning).toMatchObject({ phase: "RUNNING", at: deadlineAt - leadMs });
    expect(warning?.message).toContain("5 min left before its time limit");
    expect(only(h, id).deadlineWarnedAt).toBe(deadlineAt - leadMs);
    // The workload itself is untouched: the warning is news, not a new state.
    expect(h.workload(id)).toEqual(before);
    for (let i = 0; i < 3; i++) await h.tick();
    expect(warnings(h, id)).toHaveLength(1);
    // A restarted daemon (a fresh reconciler over the same store) does not warn again.
    h.restart();
    await h.tick();
    expect(warnings(h, id)).toHaveLength(1);
  });

  test("a profile's own warning time is used; 0 turns the warning off", async () => {
    const h = make(3_600, { sim: { profiles: [profile(60)] } });
    const { id, deadlineAt } = await running(h);
    h.clock.set(deadlineAt - 120_000);
    await h.tick();
    expect(warnings(h, id)).toHaveLength(0);
    h.clock.set(deadlineAt - 61_000);
    await h.tick();
    expect(warnings(h, id)).toHaveLength(1);
    expect(warnings(h, id)[0]?.message).toContain("1 min left");

    const off = make(3_600, { sim: { profiles: [profile(0)] } });
    const quiet = await running(off);
    off.clock.set(quiet.deadlineAt - 10_000);
    await off.tick();
    expect(warnings(off, quiet.id)).toHaveLength(0);
  });

  test("a backend that reports only changes: the steady workload is looked at when its warning is due", async () => {
    // Its workload is settled (skipped by ticks while nothing changes, up to the full-observe
    // interval of 60 s); the warning comes due by the clock alone.
    const h = make(3_600, { sim: { reportsChanges: true } });
    const { id, deadlineAt } = await running(h);
    // A full tick 30 s before the warning, one focused tick after it, then the due tick
    // (h.tick advances the clock by 1 s), all within the 60 s between full ticks.
    h.clock.set(deadlineAt - 300_000 - 31_000);
    await h.tick();
    await h.tick();
    expect(warnings(h, id)).toHaveLength(0);
    h.clock.set(deadlineAt - 300_000 - 1_000);
    await h.tick();
    expect(warnings(h, id)).toEqual([expect.objectContaining({ at: deadlineAt - 300_000 })]);
  });

  test("a short job is warned at half its time, not the moment it starts", async () => {
    const h = make(120);
    const { id, deadlineAt } = await running(h);
    await h.tick();
    expect(warnings(h, id)).toHaveLength(0);
    h.clock.set(deadlineAt - 61_000);
    await h.tick();
    expect(warnings(h, id)).toHaveLength(1);
  });
});

describe("warnNearDeadline", () => {
  const base: Allocation = {
    id: "a1",
    workloadId: "w1",
    epoch: 1,
    token: "o4s-aaaaaaaaaaaaaaaaaaaaaaaaaa" as Allocation["token"],
    handle: null,
    phase: "RUNNING",
    reason: "STARTED",
    message: "running",
    exitCode: null,
    submittedAt: 0,
    startedAt: 0,
    endedAt: null,
    acknowledgedAt: null,
    deadlineAt: 3_600_000,
    deadlineWarnedAt: null,
  };

  test("due only inside the window, never after the end, never twice, never off", () => {
    const lead = 300_000;
    expect(warnNearDeadline(base, lead, 3_300_000 - 1)).toBeNull();
    expect(warnNearDeadline(base, lead, 3_300_000)?.notice?.reason).toBe("TIME_LIMIT_NEAR");
    expect(warnNearDeadline(base, lead, 3_599_999)?.allocation?.deadlineWarnedAt).toBe(3_599_999);
    expect(warnNearDeadline(base, lead, 3_600_000)).toBeNull();
    expect(warnNearDeadline({ ...base, deadlineWarnedAt: 1 }, lead, 3_400_000)).toBeNull();
    expect(warnNearDeadline({ ...base, deadlineAt: null }, lead, 3_400_000)).toBeNull();
    expect(warnNearDeadline({ ...base, phase: "STOPPING" }, lead, 3_400_000)).toBeNull();
    expect(warnNearDeadline(base, 0, 3_400_000)).toBeNull();
  });

  test("the step is a compare-and-set on RUNNING that leaves phase and reason as they are", () => {
    const t = warnNearDeadline(base, 300_000, 3_400_000);
    expect(t?.allocation).toMatchObject({
      id: "a1",
      expectedPhase: "RUNNING",
      phase: "RUNNING",
      reason: "STARTED",
    });
    expect(t?.workload).toBeUndefined();
  });

  test("profiles without a warning time get the default; unknown profiles too", () => {
    const leads = warningLeads([profile(90), { ...profile(), name: "other" }]);
    expect(leads("default")).toBe(90_000);
    expect(leads("other")).toBe(DEFAULT_WARN_BEFORE_LIMIT_SECONDS * 1000);
    expect(leads("missing")).toBe(DEFAULT_WARN_BEFORE_LIMIT_SECONDS * 1000);
  });
});
