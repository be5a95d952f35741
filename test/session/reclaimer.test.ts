import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  getWorkload,
  requestStop,
  setCondition,
  touchActivity,
} from "../../src/adapters/store-sqlite/index.ts";
import { bindReclaimerStore } from "../../src/adapters/store-sqlite/stores/reclaimer-store.ts";
import type { Allocation, Workload } from "../../src/core/models.ts";
import {
  createReclaimer,
  decideReclaim,
  type ReclaimerDefaults,
} from "../../src/core/reclaimer.ts";
import { manualTimeline, systemTimers } from "../../src/lib/clock.ts";
import { memoryLog, silentLog } from "../../src/lib/log.ts";
import {
  loseAttempt,
  markRunning,
  newWorkload,
  startAttempt,
  type TestStore,
  testStore,
} from "../support/store-fixtures.ts";

const SECOND = 1000;
let t: TestStore;

beforeEach(() => {
  t = testStore();
});
afterEach(() => {
  t.close();
});

function reclaimer(
  defaults: ReclaimerDefaults = { idleTimeoutSeconds: 60, maxLifetimeSeconds: 3600 },
) {
  const woken: string[] = [];
  const r = createReclaimer({
    timers: systemTimers,
    store: bindReclaimerStore(t.store),
    clock: t.clock,
    log: silentLog,
    defaults,
    onStopRequested: (id) => woken.push(id),
  });
  return { r, woken };
}

function stopOf(id: string) {
  const w = getWorkload(t.store, id);
  if (!w) throw new Error("gone");
  return w.desired;
}

describe("reclaimer: idle clock", () => {
  test("an idle session is asked to stop with IDLE_TIMEOUT, and only asked", () => {
    const id = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 30 });
    startAttempt(t.store, id);
    const { r, woken } = reclaimer();
    t.clock.advance(29 * SECOND);
    expect(r.reclaimOnce()).toEqual([]);
    t.clock.advance(1 * SECOND);
    const stopped = r.reclaimOnce();
    expect(stopped.map((s) => [s.workloadId, s.reason])).toEqual([[id, "IDLE_TIMEOUT"]]);
    const desired = stopOf(id);
    expect(desired).toEqual({
      kind: "STOP",
      reason: "IDLE_TIMEOUT",
      message:
        "the session was idle for 30 s with no activity (idle timeout 30 s); start a new session when you are back",
    });
    expect(woken).toEqual([id]);
    // Intent only: the phase is untouched, the barrier is the reconciler's.
    expect(getWorkload(t.store, id)?.phase).toBe("RUNNING");
    // Asking twice does not ask again.
    t.clock.advance(10 * SECOND);
    expect(r.reclaimOnce()).toEqual([]);
  });

  test("heartbeats and readiness updates do not count as activity; exec does", () => {
    const quiet = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 60 });
    const used = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 60 });
    startAttempt(t.store, quiet);
    startAttempt(t.store, used);
    const { r } = reclaimer();
    // Both workers alive and well: conditions re-asserted every few seconds, which is
    // everything a heartbeat can cause in the store.
    for (let i = 1; i <= 12; i++) {
      t.clock.advance(5 * SECOND);
      for (const id of [quiet, used]) {
        setCondition(t.store, id, {
          type: "WORKER_CONNECTED",
          status: "TRUE",
          reason: "WORKER_CONNECTED",
          message: `heartbeat ${i}`,
        });
      }
      // One exec in `used` at 30 s (the API records it with touchActivity).
      if (i === 6) touchActivity(t.store, used);
      if (i < 12) expect(r.reclaimOnce()).toEqual([]);
    }
    // 60 s: the quiet one is reclaimed despite its heartbeats, the used one is not.
    expect(r.reclaimOnce().map((s) => [s.workloadId, s.reason])).toEqual([[quiet, "IDLE_TIMEOUT"]]);
    t.clock.advance(30 * SECOND);
    expect(r.reclaimOnce().map((s) => [s.workloadId, s.reason])).toEqual([[used, "IDLE_TIMEOUT"]]);
  });

  test("the reclaimer never writes lastActiveAt", () => {
    const id = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 10 });
    startAttempt(t.store, id);
    const before = getWorkload(t.store, id)?.lastActiveAt;
    const { r } = reclaimer();
    for (let i = 0; i < 5; i++) {
      t.clock.advance(4 * SECOND);
      r.reclaimOnce();
    }
    expect(getWorkload(t.store, id)?.lastActiveAt).toBe(before);
  });

  test("queue time does not count: the idle clock starts when the attempt runs", () => {
    const id = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 60 });
    const a = startAttempt(t.store, id, { running: false });
    const { r } = reclaimer();
    t.clock.advance(600 * SECOND); // ten minutes in the queue
    expect(r.reclaimOnce()).toEqual([]);
    markRunning(t.store, id, a);
    expect(r.reclaimOnce()).toEqual([]);
    t.clock.advance(60 * SECOND);
    expect(r.reclaimOnce().map((s) => s.reason)).toEqual(["IDLE_TIMEOUT"]);
  });

  test("the daemon default applies when the spec does not say; null disables it", () => {
    const id = newWorkload(t.store, "SESSION");
    startAttempt(t.store, id);
    t.clock.advance(120 * SECOND);
    expect(
      reclaimer({ idleTimeoutSeconds: null, maxLifetimeSeconds: null }).r.reclaimOnce(),
    ).toEqual([]);
    expect(
      reclaimer({ idleTimeoutSeconds: 120, maxLifetimeSeconds: null })
        .r.reclaimOnce()
        .map((s) => s.reason),
    ).toEqual(["IDLE_TIMEOUT"]);
  });

  test("BATCH workloads and sessions already stopping are left alone", () => {
    const batch = newWorkload(t.store, "BATCH", { idleTimeoutSeconds: 1 });
    startAttempt(t.store, batch);
    const cancelled = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 1 });
    startAttempt(t.store, cancelled);
    requestStop(t.store, cancelled, "USER_CANCELLED", "by user");
    t.clock.advance(3600 * SECOND);
    const { r } = reclaimer();
    expect(r.reclaimOnce()).toEqual([]);
    expect(stopOf(cancelled)).toEqual({
      kind: "STOP",
      reason: "USER_CANCELLED",
      message: "by user",
    });
    expect(stopOf(batch)).toEqual({ kind: "RUN" });
  });
});

describe("reclaimer: the run loop", () => {
  test("passes at start and once per period on the injected timers, and ends when aborted", async () => {
    const id = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 30 });
    startAttempt(t.store, id);
    const timers = manualTimeline();
    let stopRequested = () => {};
    const requested = new Promise<void>((resolve) => {
      stopRequested = resolve;
    });
    const r = createReclaimer({
      store: bindReclaimerStore(t.store),
      clock: t.clock,
      log: silentLog,
      defaults: { idleTimeoutSeconds: 60, maxLifetimeSeconds: 3600 },
      intervalMs: 1000,
      timers,
      onStopRequested: () => stopRequested(),
    });
    const controller = new AbortController();
    const running = r.run(controller.signal);
    // The first pass ran at start and found nothing; the loop now waits one period.
    expect(timers.pending()).toBe(1);
    t.clock.advance(30 * SECOND);
    timers.advance(999);
    expect(stopOf(id).kind).toBe("RUN");
    timers.advance(1);
    await requested;
    expect(stopOf(id)).toMatchObject({ kind: "STOP", reason: "IDLE_TIMEOUT" });
    controller.abort();
    await running;
    expect(timers.pending()).toBe(0);
  });
});

describe("reclaimer: lifetime clock", () => {
  test("a busy session still ends at its maximum lifetime, with MAX_LIFETIME", () => {
    const id = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 60, maxLifetimeSeconds: 300 });
    startAttempt(t.store, id);
    const { r } = reclaimer();
    for (let i = 0; i < 9; i++) {
      t.clock.advance(30 * SECOND);
      touchActivity(t.store, id);
      expect(r.reclaimOnce()).toEqual([]);
    }
    t.clock.advance(30 * SECOND); // 300 s since it first ran
    touchActivity(t.store, id);
    const [stop] = r.reclaimOnce();
    expect(stop?.reason).toBe("MAX_LIFETIME");
    expect(stop?.message).toBe(
      "the session reached its maximum lifetime of 300 s; the lease is over and it cannot be extended",
    );
  });

  test("a recovery does not restart the lease", () => {
    const id = newWorkload(t.store, "SESSION", { maxLifetimeSeconds: 100 });
    const first = startAttempt(t.store, id);
    t.clock.advance(60 * SECOND);
    loseAttempt(t.store, id, first);
    t.clock.advance(10 * SECOND);
    startAttempt(t.store, id);
    const { r } = reclaimer({ idleTimeoutSeconds: null, maxLifetimeSeconds: null });
    t.clock.advance(29 * SECOND);
    expect(r.reclaimOnce()).toEqual([]);
    t.clock.advance(1 * SECOND);
    expect(r.reclaimOnce().map((s) => s.reason)).toEqual(["MAX_LIFETIME"]);
  });

  test("when both clocks ran out, MAX_LIFETIME wins", () => {
    const id = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 10, maxLifetimeSeconds: 20 });
    startAttempt(t.store, id);
    const { r } = reclaimer();
    t.clock.advance(3600 * SECOND); // e.g. the daemon was down while both ran out
    expect(r.reclaimOnce().map((s) => s.reason)).toEqual(["MAX_LIFETIME"]);
  });

  test("the log records which clock ran out", () => {
    const log = memoryLog();
    const id = newWorkload(t.store, "SESSION", { idleTimeoutSeconds: 1 });
    startAttempt(t.store, id);
    const r = createReclaimer({
      timers: systemTimers,
      store: bindReclaimerStore(t.store),
      clock: t.clock,
      log,
      defaults: { idleTimeoutSeconds: null, maxLifetimeSeconds: null },
    });
    t.clock.advance(SECOND);
    r.reclaimOnce();
    expect(log.lines.join("")).toContain('"reason":"IDLE_TIMEOUT"');
  });
});

describe("decideReclaim invariants", () => {
  const base: Workload = {
    id: "w",
    kind: "SESSION",
    name: "w",
    profile: "p",
    spec: {},
    specRevision: 1,
    phase: "RUNNING",
    reason: null,
    message: null,
    desired: { kind: "RUN" },
    executionEpoch: 1,
    maxAttempts: 1,
    exitCode: null,
    idempotencyKey: null,
    createdAt: 0,
    updatedAt: 0,
    lastActiveAt: 0,
  };
  function allocation(startedAt: number | null): Allocation {
    return {
      id: "a",
      workloadId: "w",
      epoch: 1,
      token: "o4s-aaaaaaaaaaaaaaaaaaaaaaaaaa" as Allocation["token"],
      handle: null,
      phase: "RUNNING",
      reason: null,
      message: null,
      exitCode: null,
      submittedAt: null,
      startedAt,
      endedAt: null,
      acknowledgedAt: null,
      deadlineAt: null,
      deadlineWarnedAt: null,
    };
  }

  test("the reason is the clock that ran out; lifetime when both; keep when neither", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }), // startedAt (s)
        fc.integer({ min: 0, max: 10_000 }), // last activity after start (s)
        fc.integer({ min: 0, max: 20_000 }), // now after last activity (s)
        fc.integer({ min: 1, max: 5_000 }), // idle timeout (s)
        fc.integer({ min: 1, max: 20_000 }), // max lifetime (s)
        (start, activeAfter, nowAfter, idle, lifetime) => {
          const startedAt = start * SECOND;
          const lastActiveAt = startedAt + activeAfter * SECOND;
          const now = lastActiveAt + nowAfter * SECOND;
          const a = allocation(startedAt);
          const w = { ...base, lastActiveAt };
          const d = decideReclaim(w, [a], a, now, {
            idleTimeoutSeconds: idle,
            maxLifetimeSeconds: lifetime,
          });
          const lifetimeOut = now - startedAt >= lifetime * SECOND;
          const idleOut = now - lastActiveAt >= idle * SECOND;
          const expected = lifetimeOut ? "MAX_LIFETIME" : idleOut ? "IDLE_TIMEOUT" : "Keep";
          return (d.kind === "Keep" ? "Keep" : d.reason) === expected;
        },
      ),
    );
  });

  test("the lifetime clock does not run before the session first held resources", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1e9 }), (now) => {
        const d = decideReclaim(base, [allocation(null)], allocation(null), now, {
          idleTimeoutSeconds: null,
          maxLifetimeSeconds: 1,
        });
        return d.kind === "Keep";
      }),
    );
  });
});
