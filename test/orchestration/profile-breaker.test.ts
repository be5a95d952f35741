/**
 * A breaker per profile (issue 21): after K consecutive rejections the profile is degraded,
 * its workloads wait PENDING with PROFILE_DEGRADED and the backend's message, no submission
 * goes out until the back-off has passed, then one trial; a success closes it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { SubmissionToken } from "../../src/core/models.ts";
import type { SubmitResult } from "../../src/core/ports/allocation-backend.ts";
import { createProfileBreakers } from "../../src/core/reconciler/profile-breaker.ts";
import { messageForms } from "../../src/core/scheduler-words.ts";
import { type Harness, harness } from "../support/reconciler-harness.ts";

let open: Harness[] = [];
afterEach(() => {
  for (const h of open) h.close();
  open = [];
});

describe("createProfileBreakers", () => {
  const options = { threshold: 3, initialBackoffMs: 1_000, maxBackoffMs: 4_000 };

  test("opens after K consecutive rejections of one profile, not of another", () => {
    const b = createProfileBreakers(options);
    b.rejected("broken", "no", 0);
    b.rejected("broken", "no", 0);
    b.rejected("fine", "once", 0);
    b.accepted("fine");
    expect(b.state("broken").kind).toBe("Closed");
    b.rejected("broken", "partition not available", 10);
    expect(b.state("broken")).toMatchObject({
      kind: "Open",
      consecutiveRejections: 3,
      message: "partition not available",
      retryAtMs: 1_010,
    });
    expect(b.allow("broken", 500)).toBe(false);
    expect(b.allow("fine", 500)).toBe(true);
    expect(b.state("fine")).toEqual({ kind: "Closed", consecutiveRejections: 0 });
  });

  test("a trial whose answer never comes does not hold the profile for ever", () => {
    const b = createProfileBreakers(options);
    for (let i = 0; i < 3; i++) b.rejected("p", "no", 0);
    expect(b.allow("p", 1_000)).toBe(true);
    // No answer (the workload moved on, the call hung): one more back-off, then another try.
    expect(b.allow("p", 1_999)).toBe(false);
    expect(b.allow("p", 2_000)).toBe(true);
  });

  test("one trial per back-off, doubled up to the ceiling; a success closes it", () => {
    const b = createProfileBreakers(options);
    for (let i = 0; i < 3; i++) b.rejected("p", "no", 0);
    expect(b.allow("p", 1_000)).toBe(true);
    // The trial is out: nothing else goes until it is answered.
    expect(b.allow("p", 1_000)).toBe(false);
    b.rejected("p", "still no", 1_000);
    expect(b.state("p")).toMatchObject({ kind: "Open", retryAtMs: 3_000 });
    expect(b.allow("p", 2_999)).toBe(false);
    expect(b.allow("p", 3_000)).toBe(true);
    b.rejected("p", "still no", 3_000);
    expect(b.state("p")).toMatchObject({ retryAtMs: 7_000 });
    expect(b.allow("p", 7_000)).toBe(true);
    b.rejected("p", "still no", 7_000);
    // Capped at 4 s.
    expect(b.state("p")).toMatchObject({ retryAtMs: 11_000 });
    expect(b.allow("p", 11_000)).toBe(true);
    b.accepted("p");
    expect(b.state("p").kind).toBe("Closed");
    expect(b.views()).toEqual([]);
  });
});

describe("the reconciler with a profile the backend keeps refusing", () => {
  test("K submissions, then the workloads wait PENDING; after the back-off one trial; a success lets them all go", async () => {
    const h = harness();
    open.push(h);
    let submits = 0;
    const base = h.sim.backend.submit.bind(h.sim.backend);
    h.sim.backend.submit = (requests) => {
      submits += requests.length;
      return base(requests);
    };
    h.sim.failNextSubmits("REJECT", "REJECT", "REJECT", "REJECT");
    const first = [h.addWorkload(), h.addWorkload(), h.addWorkload()];
    for (const id of first) {
      void id;
      await h.tick();
    }
    expect(submits).toBe(3);
    // None failed (issue 32): the first two waited for the verdict, the third opened the
    // breaker, and all three wait for the profile.
    for (const id of first) {
      expect(h.workload(id)).toMatchObject({
        phase: "PENDING",
        reason: "PROFILE_DEGRADED",
        message: expect.stringContaining("simulated rejection"),
      });
    }
    const waiting = [h.addWorkload(), h.addWorkload()];
    for (let i = 0; i < 5; i++) await h.tick();
    // No submission while the breaker is open: they wait, saying why.
    expect(submits).toBe(3);
    for (const id of waiting) {
      expect(h.workload(id)).toMatchObject({ phase: "PENDING", reason: "PROFILE_DEGRADED" });
    }
    expect(h.reconciler.profileBreakers()).toEqual([
      {
        profile: "default",
        state: expect.objectContaining({ kind: "Open", consecutiveRejections: 3 }),
      },
    ]);
    // After the back-off: exactly one trial, refused (the fourth fault): back to waiting.
    h.clock.advance(30_000);
    await h.tick();
    expect(submits).toBe(4);
    for (let i = 0; i < 3; i++) await h.tick();
    expect(submits).toBe(4);
    // The profile is fixed: the next trial succeeds, the breaker closes, everyone goes.
    h.clock.advance(60_000);
    await h.tick();
    await h.tick();
    expect(h.reconciler.profileBreakers()).toEqual([]);
    for (const id of [...first, ...waiting]) {
      expect(h.workload(id).phase).toBe("QUEUED");
    }
  });
});

describe("a refusal of one request's own arguments", () => {
  test("does not count towards its profile's breaker (one client cannot degrade a profile)", async () => {
    const h = harness();
    open.push(h);
    const base = h.sim.backend.submit.bind(h.sim.backend);
    h.sim.backend.submit = async (requests) => {
      const answers = await base(requests);
      return new Map(
        [...answers].map(([token, a]) => [
          token,
          a.kind === "Rejected" ? { ...a, byRequest: true as const } : a,
        ]),
      );
    };
    h.sim.failNextSubmits("REJECT", "REJECT", "REJECT", "REJECT", "REJECT");
    const ids = [1, 2, 3, 4, 5].map(() => h.addWorkload());
    await h.tick();
    expect(ids.map((id) => h.workload(id).reason)).toEqual(Array(5).fill("SUBMIT_REJECTED"));
    expect(h.reconciler.profileBreakers()).toEqual([]);
    const next = h.addWorkload();
    await h.tick();
    expect(h.workload(next).phase).toBe("QUEUED");
  });
});

describe("while the breaker learns (issue 32)", () => {
  test("a profile refused for all: 0 of 10 FAILED; they wait, and all run once it is back", async () => {
    const h = harness();
    open.push(h);
    h.sim.failNextSubmits(...Array<"REJECT">(20).fill("REJECT"));
    const ids = Array.from({ length: 10 }, () => h.addWorkload());
    for (let i = 0; i < 3; i++) await h.tick();
    const phases = ids.map((id) => h.workload(id).phase);
    expect(phases.filter((p) => p === "FAILED")).toEqual([]);
    for (const id of ids) {
      expect(h.workload(id)).toMatchObject({ phase: "PENDING", reason: "PROFILE_DEGRADED" });
    }
    h.sim.clearSubmitFaults();
    h.clock.advance(30_000);
    for (let i = 0; i < 4; i++) await h.tick();
    expect(h.reconciler.profileBreakers()).toEqual([]);
    expect(ids.map((id) => h.workload(id).phase)).toEqual(Array(10).fill("QUEUED"));
  });

  test("one workload refused alone: it waits, then fails with its own refusal once the profile accepts another", async () => {
    const h = harness();
    open.push(h);
    let submits = 0;
    const base = h.sim.backend.submit.bind(h.sim.backend);
    h.sim.backend.submit = (requests) => {
      submits += requests.length;
      return base(requests);
    };
    h.sim.failNextSubmits("REJECT");
    const refused = h.addWorkload();
    await h.tick();
    // Not yet known whose fault it is: it waits, and is not sent again meanwhile.
    expect(h.workload(refused)).toMatchObject({ phase: "PENDING", reason: "SUBMIT_REFUSED" });
    await h.tick();
    expect(submits).toBe(1);
    const fine = h.addWorkload();
    await h.tick();
    await h.tick();
    expect(h.workload(fine).phase).toBe("QUEUED");
    // The profile works: the refusal was this workload's own.
    expect(h.workload(refused)).toMatchObject({
      phase: "FAILED",
      reason: "SUBMIT_REJECTED",
      message: expect.stringContaining("simulated rejection"),
    });
    expect(submits).toBe(2);
  });

  test("one workload refused and nothing else to tell by: it fails after the back-off, never hangs", async () => {
    const h = harness();
    open.push(h);
    h.sim.failNextSubmits("REJECT");
    const refused = h.addWorkload();
    await h.tick();
    expect(h.workload(refused)).toMatchObject({ phase: "PENDING", reason: "SUBMIT_REFUSED" });
    h.clock.advance(30_000);
    await h.tick();
    expect(h.workload(refused)).toMatchObject({ phase: "FAILED", reason: "SUBMIT_REJECTED" });
  });

  test("that failure waits for a tick in which the backend answers (never during an outage)", async () => {
    const h = harness();
    open.push(h);
    h.sim.failNextSubmits("REJECT");
    const refused = h.addWorkload();
    await h.tick();
    h.sim.setAvailable(false);
    h.clock.advance(30_000);
    for (let i = 0; i < 3; i++) await h.tick();
    expect(h.workload(refused)).toMatchObject({ phase: "PENDING", reason: "SUBMIT_REFUSED" });
    h.sim.setAvailable(true);
    await h.tick();
    expect(h.workload(refused)).toMatchObject({ phase: "FAILED", reason: "SUBMIT_REJECTED" });
  });
});

describe("a refusal in the scheduler's words (issue 35)", () => {
  test("the held and the failed workload keep them for the admin beside the hidden form", async () => {
    const h = harness();
    open.push(h);
    const said = "Invalid partition name specified: gpuu";
    const hide = (m: string) => m.replace("partition", "placement").replace("gpuu", "[hidden]");
    const base = h.sim.backend.submit.bind(h.sim.backend);
    h.sim.backend.submit = async (requests) => {
      const answers = await base(requests);
      return new Map<SubmissionToken, SubmitResult>(
        [...answers].map(([token, a]): [SubmissionToken, SubmitResult] => {
          if (a.kind !== "Rejected") return [token, a];
          const forms = messageForms(said, hide);
          return [token, { ...a, message: forms.message, messageAdmin: forms.messageAdmin ?? "" }];
        }),
      );
    };
    h.sim.failNextSubmits("REJECT");
    const refused = h.addWorkload();
    await h.tick();
    const waiting = h.workload(refused);
    expect(waiting).toMatchObject({ phase: "PENDING", reason: "SUBMIT_REFUSED" });
    expect(waiting.message).toContain("Invalid placement name specified: [hidden]");
    expect(waiting.messageAdmin).toContain(said);
    h.clock.advance(30_000);
    await h.tick();
    expect(h.workload(refused)).toMatchObject({
      phase: "FAILED",
      reason: "SUBMIT_REJECTED",
      message: "Invalid placement name specified: [hidden]",
      messageAdmin: said,
    });
  });
});

describe("a refusal naming the owner's unusable account", () => {
  test("fails that workload with ACCOUNT_UNUSABLE and never counts towards the breaker", async () => {
    const h = harness();
    open.push(h);
    const base = h.sim.backend.submit.bind(h.sim.backend);
    h.sim.backend.submit = async (requests) => {
      const answers = await base(requests);
      return new Map(
        [...answers].map(([token, a]) => [
          token,
          a.kind === "Rejected"
            ? {
                ...a,
                message: 'unix user "gone": no such account',
                reason: "ACCOUNT_UNUSABLE" as const,
              }
            : a,
        ]),
      );
    };
    h.sim.failNextSubmits("REJECT", "REJECT", "REJECT", "REJECT", "REJECT");
    const ids = [1, 2, 3, 4, 5].map(() => h.addWorkload());
    await h.tick();
    for (const id of ids) {
      expect(h.workload(id)).toMatchObject({
        phase: "FAILED",
        reason: "ACCOUNT_UNUSABLE",
        message: expect.stringContaining('"gone"'),
      });
    }
    expect(h.reconciler.profileBreakers()).toEqual([]);
    const next = h.addWorkload();
    await h.tick();
    expect(h.workload(next).phase).toBe("QUEUED");
  });
});
