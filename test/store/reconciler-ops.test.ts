import { afterEach, describe, expect, test } from "bun:test";
import {
  applyTransition,
  applyTransitions,
  createWorkload,
  findAllocationsByTokens,
  getWorkload,
  listEvents,
  loadReconcileSnapshot,
  loadReconcileView,
  mintAttempt,
  mintAttempts,
  openDatabase,
  requestStop,
  type StoreDeps,
} from "../../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import {
  externalHandle,
  mintSubmissionToken,
  type SubmissionToken,
} from "../../src/core/models.ts";
import { manualClock } from "../../src/lib/clock.ts";

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
let opened: ReturnType<typeof openDatabase>[] = [];
afterEach(() => {
  for (const o of opened) o.close();
  opened = [];
});

function store(): StoreDeps {
  return storeWithSqlite().deps;
}

function storeWithSqlite() {
  const o = openDatabase(":memory:");
  opened.push(o);
  return { deps: { db: o.db, clock: manualClock() } satisfies StoreDeps, sqlite: o.sqlite };
}

function add(deps: StoreDeps, id: string, maxAttempts = 1): void {
  createWorkload(deps, {
    id,
    kind: "BATCH",
    name: id,
    profile: "default",
    spec: { command: ["echo", id], env: { K: "v" } },
    maxAttempts,
    idempotencyKey: null,
    requestHash: null,
  });
}

function mint(deps: StoreDeps, workloadId: string, epoch: number) {
  const r = mintAttempt(deps, {
    workloadId,
    allocationId: `${workloadId}-a${epoch + 1}`,
    token: mintSubmissionToken(random),
    expectedEpoch: epoch,
    message: "attempt",
  });
  if (r.kind !== "Minted") throw new Error(r.message);
  return r.allocation;
}

/** A store with workloads in every shape the reconciler meets. */
function populated() {
  const { deps, sqlite } = storeWithSqlite();
  add(deps, "pending");
  add(deps, "submitting");
  mint(deps, "submitting", 0);
  add(deps, "running");
  const a = mint(deps, "running", 0);
  applyTransition(deps, {
    allocation: {
      id: a.id,
      expectedPhase: "SUBMITTING",
      phase: "RUNNING",
      reason: null,
      message: null,
      handle: externalHandle("h-1"),
    },
    workload: {
      id: "running",
      expectedPhase: "SUBMITTING",
      expectedEpoch: 1,
      phase: "RUNNING",
      reason: null,
      message: null,
    },
  });
  add(deps, "retrying", 2);
  const lost = mint(deps, "retrying", 0);
  applyTransition(deps, {
    allocation: {
      id: lost.id,
      expectedPhase: "SUBMITTING",
      phase: "LOST",
      reason: "NOT_FOUND_BY_BACKEND",
      message: null,
    },
    workload: {
      id: "retrying",
      expectedPhase: "SUBMITTING",
      expectedEpoch: 1,
      phase: "PENDING",
      reason: "RETRYING",
      message: null,
    },
  });
  add(deps, "second-attempt", 2);
  const first = mint(deps, "second-attempt", 0);
  applyTransition(deps, {
    allocation: {
      id: first.id,
      expectedPhase: "SUBMITTING",
      phase: "LOST",
      reason: null,
      message: null,
    },
  });
  mint(deps, "second-attempt", 1);
  add(deps, "done");
  applyTransition(deps, {
    workload: {
      id: "done",
      expectedPhase: "PENDING",
      expectedEpoch: 0,
      phase: "CANCELLED",
      reason: "USER_CANCELLED",
      message: null,
    },
  });
  add(deps, "stopping");
  requestStop(deps, "stopping", "IDLE_TIMEOUT", "idle");
  return { deps, sqlite };
}

describe("loadReconcileSnapshot", () => {
  test("is the same view as loadReconcileView, in one statement", () => {
    const { deps } = populated();
    const byId = <T extends { readonly workload: { readonly id: string } }>(xs: readonly T[]) =>
      [...xs].sort((a, b) => a.workload.id.localeCompare(b.workload.id));
    const snapshot = loadReconcileSnapshot(deps);
    expect(byId(snapshot)).toEqual(byId(loadReconcileView(deps)));
    expect(snapshot.map((i) => i.workload.id).sort()).toEqual(
      ["pending", "retrying", "running", "second-attempt", "stopping", "submitting"].sort(),
    );
    const second = snapshot.find((i) => i.workload.id === "second-attempt");
    expect(second?.current?.epoch).toBe(2);
    expect(snapshot.find((i) => i.workload.id === "retrying")?.current?.phase).toBe("LOST");
    expect(snapshot.find((i) => i.workload.id === "stopping")?.workload.desired).toEqual({
      kind: "STOP",
      reason: "IDLE_TIMEOUT",
      message: "idle",
    });
  });

  test("a corrupted row throws instead of being guessed at", () => {
    const { deps, sqlite } = populated();
    sqlite.run("UPDATE allocations SET phase = 'WEIRD' WHERE workload_id = 'running'");
    expect(() => loadReconcileSnapshot(deps)).toThrow(/unknown phase/);
  });

  test("spec is decoded on first read, once, and a corrupted one throws there", () => {
    const { deps, sqlite } = populated();
    const running = loadReconcileSnapshot(deps).find((i) => i.workload.id === "running");
    const expected = getWorkload(deps, "running")?.spec;
    expect(running?.workload.spec).toEqual(expected as NonNullable<typeof expected>);
    expect(running?.workload.spec).toBe(running?.workload.spec as NonNullable<typeof expected>);
    expect({ ...running?.workload }.spec).toEqual(expected as NonNullable<typeof expected>);
    sqlite.run("UPDATE workloads SET spec_json = '{broken' WHERE id = 'running'");
    const corrupted = loadReconcileSnapshot(deps).find((i) => i.workload.id === "running");
    expect(() => corrupted?.workload.spec).toThrow();
  });
});

describe("applyTransitions", () => {
  test("each transition keeps its own compare-and-set inside the batch", () => {
    const deps = store();
    add(deps, "a");
    add(deps, "b");
    const results = applyTransitions(deps, [
      {
        workload: {
          id: "a",
          expectedPhase: "PENDING",
          expectedEpoch: 0,
          phase: "CANCELLED",
          reason: "USER_CANCELLED",
          message: null,
        },
      },
      {
        workload: {
          id: "b",
          expectedPhase: "RUNNING",
          expectedEpoch: 0,
          phase: "CANCELLED",
          reason: "USER_CANCELLED",
          message: null,
        },
      },
    ]);
    expect(results).toEqual([true, false]);
    expect(getWorkload(deps, "a")?.phase).toBe("CANCELLED");
    expect(getWorkload(deps, "b")?.phase).toBe("PENDING");
    expect(listEvents(deps, "a").map((e) => e.phase)).toEqual(["PENDING", "CANCELLED"]);
  });

  test("a failure inside the batch rolls the whole batch back", () => {
    const { deps, sqlite } = storeWithSqlite();
    add(deps, "a");
    add(deps, "b");
    const x = mint(deps, "a", 0);
    const y = mint(deps, "b", 0);
    // Broken infrastructure on the second write of the batch.
    sqlite.run(
      "CREATE TRIGGER boom BEFORE UPDATE ON allocations WHEN NEW.id = 'b-a1' BEGIN SELECT RAISE(ABORT, 'boom'); END",
    );
    expect(() =>
      applyTransitions(deps, [
        {
          allocation: {
            id: x.id,
            expectedPhase: "SUBMITTING",
            phase: "QUEUED",
            reason: null,
            message: null,
          },
        },
        {
          allocation: {
            id: y.id,
            expectedPhase: "SUBMITTING",
            phase: "QUEUED",
            reason: null,
            message: null,
          },
        },
      ]),
    ).toThrow(/boom/);
    expect(findAllocationsByTokens(deps, [x.token])[0]?.allocation.phase).toBe("SUBMITTING");
  });
});

describe("mintAttempts", () => {
  test("mints each independently; a stale one does not stop the others", () => {
    const deps = store();
    add(deps, "a");
    add(deps, "b");
    mint(deps, "b", 0);
    const results = mintAttempts(deps, [
      {
        workloadId: "a",
        allocationId: "a1",
        token: mintSubmissionToken(random),
        expectedEpoch: 0,
        message: "m",
      },
      {
        workloadId: "b",
        allocationId: "b9",
        token: mintSubmissionToken(random),
        expectedEpoch: 0,
        message: "m",
      },
      {
        workloadId: "nope",
        allocationId: "n1",
        token: mintSubmissionToken(random),
        expectedEpoch: 0,
        message: "m",
      },
    ]);
    expect(results.map((r) => r.kind)).toEqual(["Minted", "Stale", "Stale"]);
    expect(getWorkload(deps, "a")).toMatchObject({ phase: "SUBMITTING", executionEpoch: 1 });
  });
});

describe("findAllocationsByTokens", () => {
  test("returns each known token with its workload as stored now; unknown tokens are absent", () => {
    const deps = store();
    const tokens: SubmissionToken[] = [];
    for (let i = 0; i < 600; i++) {
      add(deps, `w${i}`);
      tokens.push(mint(deps, `w${i}`, 0).token);
    }
    const stranger = mintSubmissionToken(random);
    const found = findAllocationsByTokens(deps, [...tokens, stranger]);
    expect(found).toHaveLength(600);
    expect(new Set(found.map((f) => f.allocation.token))).toEqual(new Set(tokens));
    for (const f of found) expect(f.workload.id).toBe(f.allocation.workloadId);
  });
});

describe("bindReconcilerStore", () => {
  test("splits large batches into several transactions with the same results", () => {
    const deps = store();
    for (let i = 0; i < 7; i++) add(deps, `w${i}`);
    const bound = bindReconcilerStore(deps, { maxBatch: 3 });
    const minted = bound.mintAttempts(
      Array.from({ length: 7 }, (_, i) => ({
        workloadId: `w${i}`,
        allocationId: `a${i}`,
        token: mintSubmissionToken(random),
        expectedEpoch: 0,
        message: "m",
      })),
    );
    expect(minted.map((m) => m.kind)).toEqual(Array(7).fill("Minted"));
    const applied = bound.applyTransitions(
      Array.from({ length: 7 }, (_, i) => ({
        allocation: {
          id: `a${i}`,
          expectedPhase: i === 3 ? ("RUNNING" as const) : ("SUBMITTING" as const),
          phase: "QUEUED" as const,
          reason: null,
          message: null,
        },
      })),
    );
    expect(applied).toEqual([true, true, true, false, true, true, true]);
    expect(bound.loadView()).toHaveLength(7);
  });
});

// Issue 33: the epoch half of each compare-and-set was untested; a phase that matches by
// coincidence (a workload back in PENDING for its next attempt) must not let a decision
// made about an earlier attempt land on the current one.
describe("epoch guards", () => {
  test("a transition decided at an older epoch is refused, though the phase matches", () => {
    const { deps } = populated();
    const applied = applyTransition(deps, {
      workload: {
        id: "retrying",
        expectedPhase: "PENDING",
        expectedEpoch: 0,
        phase: "FAILED",
        reason: "SUBMIT_REJECTED",
        message: "about the first attempt",
      },
    });
    expect(applied).toBe(false);
    expect(getWorkload(deps, "retrying")).toMatchObject({
      phase: "PENDING",
      reason: "RETRYING",
      executionEpoch: 1,
    });
  });

  test("an attempt minted from an older epoch is Stale and adds no row", () => {
    const { deps, sqlite } = populated();
    const count = () =>
      sqlite
        .query<{ n: number }, [string]>(
          "SELECT count(*) AS n FROM allocations WHERE workload_id = ?",
        )
        .get("retrying")?.n;
    const before = count();
    const result = mintAttempt(deps, {
      workloadId: "retrying",
      allocationId: "retrying-again",
      token: mintSubmissionToken(random),
      expectedEpoch: 0,
      message: "attempt",
    });
    expect(result).toEqual({ kind: "Stale", message: "epoch moved to 1" });
    expect(count()).toBe(before);
    expect(getWorkload(deps, "retrying")?.executionEpoch).toBe(1);
  });
});
