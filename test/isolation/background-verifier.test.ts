import { describe, expect, test } from "bun:test";
import {
  createBackgroundVerifier,
  type ProbeOutcome,
} from "../../src/core/isolation/background-verifier.ts";
import type { Timers } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";

/** A schedule the test fires by hand, recording the delays asked for. */
function manualSchedule() {
  const pending: { delayMs: number; fn: () => void; cancelled: boolean }[] = [];
  const schedule: Timers = {
    after(delayMs, fn) {
      const entry = { delayMs, fn, cancelled: false };
      pending.push(entry);
      return () => {
        entry.cancelled = true;
      };
    },
  };
  return {
    schedule,
    delays: () => pending.map((p) => p.delayMs),
    fireNext() {
      const next = pending.find((p) => !p.cancelled);
      if (!next) throw new Error("nothing scheduled");
      pending.splice(pending.indexOf(next), 1);
      next.fn();
    },
    live: () => pending.filter((p) => !p.cancelled).length,
  };
}

/** A probe whose answers the test releases one at a time. */
function scriptedProbe() {
  const waiting: ((o: ProbeOutcome) => void)[] = [];
  const signals: AbortSignal[] = [];
  return {
    calls: () => waiting.length,
    signals: () => signals,
    probe: (signal: AbortSignal) =>
      new Promise<ProbeOutcome>((resolve) => {
        signals.push(signal);
        waiting.push(resolve);
      }),
    answer(outcome: ProbeOutcome) {
      const next = waiting.shift();
      if (!next) throw new Error("no probe in flight");
      next(outcome);
    },
  };
}

const VERIFIED = { kind: "Verified", mechanism: "bwrap" } as const;
const UNVERIFIED = { kind: "Unverified", message: "no bwrap on node n1" } as const;
const QUEUED = { kind: "Inconclusive", message: "still queued" } as const;

function setup(remembered?: { readonly kind: "Verified"; readonly mechanism: string }) {
  const clock = manualSchedule();
  const probe = scriptedProbe();
  const verifier = createBackgroundVerifier({
    probe: probe.probe,
    log: memoryLog(),
    schedule: clock.schedule,
    verifiedIntervalMs: 600_000,
    retryIntervalMs: 60_000,
    ...(remembered === undefined ? {} : { remembered }),
  });
  return { clock, probe, verifier };
}

describe("a verdict remembered from an earlier run", () => {
  const REMEMBERED = { kind: "Verified", mechanism: "bwrap (remembered)" } as const;

  test("answers at once while the probe it starts at once is still queued", async () => {
    const { probe, verifier } = setup(REMEMBERED);
    verifier.start();
    expect(probe.calls()).toBe(1);
    expect(verifier.current()).toEqual(REMEMBERED);
    // Every node held by other jobs: the probe cannot run, and the remembered verdict stands.
    probe.answer(QUEUED);
    await verifier.settled();
    expect(verifier.current()).toEqual(REMEMBERED);
  });

  test("is replaced by what the probe finds", async () => {
    const { probe, verifier } = setup(REMEMBERED);
    verifier.start();
    probe.answer(UNVERIFIED);
    await verifier.settled();
    expect(verifier.current()).toEqual(UNVERIFIED);
  });
});

describe("background isolation verification", () => {
  test("admission reads the last verdict and never waits for a probe", async () => {
    const { probe, verifier } = setup();
    verifier.start();
    expect(probe.calls()).toBe(1);
    // The probe has not answered: reads return at once, as not verified yet, and start none.
    for (let i = 0; i < 5; i++) expect(verifier.current().kind).toBe("Unverified");
    expect(verifier.current()).toMatchObject({
      message: expect.stringContaining("not verified yet"),
    });
    probe.answer(VERIFIED);
    await verifier.settled();
    expect(verifier.current()).toEqual(VERIFIED);
  });

  test("on a schedule: 10 min after Verified, 1 min after Unverified; one probe at a time", async () => {
    const { clock, probe, verifier } = setup();
    verifier.start();
    probe.answer(VERIFIED);
    await verifier.settled();
    expect(clock.delays()).toEqual([600_000]);
    clock.fireNext();
    verifier.start(); // a second start while a probe is in flight starts nothing
    expect(probe.calls()).toBe(1);
    probe.answer(UNVERIFIED);
    await verifier.settled();
    expect(verifier.current()).toEqual(UNVERIFIED);
    expect(clock.delays()).toEqual([60_000]);
  });

  test("a probe still queued does not flap an earlier good verdict to refused", async () => {
    const { clock, probe, verifier } = setup();
    verifier.start();
    probe.answer(VERIFIED);
    await verifier.settled();
    clock.fireNext();
    probe.answer(QUEUED);
    await verifier.settled();
    expect(verifier.current()).toEqual(VERIFIED);
    // Retried sooner, and a real failure then does count.
    expect(clock.delays()).toEqual([60_000]);
    clock.fireNext();
    probe.answer(UNVERIFIED);
    await verifier.settled();
    expect(verifier.current()).toEqual(UNVERIFIED);
  });

  test("a queued first probe stays 'not verified yet', saying why", async () => {
    const { probe, verifier } = setup();
    verifier.start();
    probe.answer(QUEUED);
    await verifier.settled();
    expect(verifier.current()).toEqual({
      kind: "Unverified",
      message: "not verified yet: still queued",
    });
  });

  test("a probe that throws keeps the last verdict and retries; stop() ends the schedule", async () => {
    const clock = manualSchedule();
    let n = 0;
    const verifier = createBackgroundVerifier({
      probe: async () => {
        n++;
        if (n === 2) throw new Error("sbatch vanished");
        return VERIFIED;
      },
      log: memoryLog(),
      schedule: clock.schedule,
      verifiedIntervalMs: 600_000,
      retryIntervalMs: 60_000,
    });
    verifier.start();
    await verifier.settled();
    clock.fireNext();
    await verifier.settled();
    expect(verifier.current()).toEqual(VERIFIED);
    expect(clock.delays()).toEqual([60_000]);
    verifier.stop();
    expect(clock.live()).toBe(0);
  });

  test("a probe that throws before any verdict is never Verified: not verified yet, saying why", async () => {
    const clock = manualSchedule();
    const verifier = createBackgroundVerifier({
      probe: async () => {
        throw new Error("bwrap: execvp failed");
      },
      log: memoryLog(),
      schedule: clock.schedule,
      verifiedIntervalMs: 600_000,
      retryIntervalMs: 60_000,
    });
    verifier.start();
    await verifier.settled();
    for (let i = 0; i < 3; i += 1) {
      expect(verifier.current()).toEqual({
        kind: "Unverified",
        message: "not verified yet: the probe failed: Error: bwrap: execvp failed",
      });
      expect(clock.delays()).toEqual([60_000]);
      clock.fireNext();
      await verifier.settled();
    }
    verifier.stop();
  });

  test("seeded with the start-up verdict, the first probe waits its interval", () => {
    const clock = manualSchedule();
    const probe = scriptedProbe();
    const verifier = createBackgroundVerifier({
      probe: probe.probe,
      log: memoryLog(),
      schedule: clock.schedule,
      seed: VERIFIED,
      verifiedIntervalMs: 600_000,
      retryIntervalMs: 60_000,
    });
    verifier.start();
    expect(verifier.current()).toEqual(VERIFIED);
    expect(probe.calls()).toBe(0);
    expect(clock.delays()).toEqual([600_000]);
  });

  test("stop() aborts the probe in flight; its late answer changes nothing and schedules nothing", async () => {
    const { clock, probe, verifier } = setup();
    verifier.start();
    expect(probe.signals()[0]?.aborted).toBe(false);
    verifier.stop();
    expect(probe.signals()[0]?.aborted).toBe(true);
    // What an aborted probe answers says nothing about the nodes.
    probe.answer(VERIFIED);
    await verifier.settled();
    expect(verifier.current().kind).toBe("Unverified");
    expect(clock.live()).toBe(0);
  });
});

describe("concluded(): whether any verdict is known yet", () => {
  test("false until a probe concludes; an inconclusive probe does not conclude", async () => {
    const { probe, verifier } = setup();
    verifier.start();
    expect(verifier.concluded()).toBe(false);
    probe.answer(QUEUED);
    await verifier.settled();
    expect(verifier.concluded()).toBe(false);
  });

  test("true after an Unverified or a Verified verdict, and from a remembered one", async () => {
    const unverified = setup();
    unverified.verifier.start();
    unverified.probe.answer(UNVERIFIED);
    await unverified.verifier.settled();
    expect(unverified.verifier.concluded()).toBe(true);
    const verified = setup();
    verified.verifier.start();
    verified.probe.answer(VERIFIED);
    await verified.verifier.settled();
    expect(verified.verifier.concluded()).toBe(true);
    expect(setup({ kind: "Verified", mechanism: "bwrap (remembered)" }).verifier.concluded()).toBe(
      true,
    );
  });
});
