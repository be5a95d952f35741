import { afterEach, describe, expect, test } from "bun:test";
import {
  createWorkload,
  getWorkload,
  listAllocations,
  listEvents,
  openDatabase,
  type StoreDeps,
} from "../../src/adapters/store-sqlite/index.ts";
import { mintSubmissionToken } from "../../src/core/models.ts";
import type { CreateWorkloadInput } from "../../src/core/ports/admission-store.ts";
import { manualClock } from "../../src/lib/clock.ts";

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

function store() {
  const o = openDatabase(":memory:");
  closers.push(() => o.close());
  const deps: StoreDeps = { db: o.db, clock: manualClock() };
  const count = (table: string) =>
    (o.sqlite.query(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  return { deps, count };
}

const input = (id: string, key: string | null, hash = "h1"): CreateWorkloadInput => ({
  id,
  kind: "BATCH",
  name: id,
  profile: "default",
  spec: { command: ["true"] },
  maxAttempts: 1,
  idempotencyKey: key,
  requestHash: hash,
});

describe("createWorkload", () => {
  test("creates the workload and its first event", () => {
    const s = store();
    const created = createWorkload(s.deps, input("w1", "k"));
    expect(created.kind).toBe("Created");
    expect(created.kind === "Created" && created.workload.phase).toBe("PENDING");
    expect([s.count("workloads"), s.count("events")]).toEqual([1, 1]);
  });

  test("with a first attempt: SUBMITTING at epoch 1, its allocation and both events, in one go", () => {
    const s = store();
    const token = mintSubmissionToken((n) => new Uint8Array(n).fill(1));
    const created = createWorkload(s.deps, {
      ...input("w1", null),
      maxAttempts: 2,
      firstAttempt: { allocationId: "a1", token, message: "attempt 1 of 2" },
    });
    if (created.kind !== "Created") throw new Error(created.kind);
    expect(getWorkload(s.deps, "w1")).toEqual(created.workload);
    expect(created.workload).toMatchObject({ phase: "SUBMITTING", executionEpoch: 1 });
    expect(listAllocations(s.deps, "w1")).toEqual(
      created.attempt === null ? [] : [created.attempt],
    );
    expect(created.attempt).toMatchObject({ id: "a1", token, epoch: 1, handle: null });
    expect(listEvents(s.deps, "w1").map((e) => [e.phase, e.message])).toEqual([
      ["PENDING", "accepted"],
      ["SUBMITTING", "attempt 1 of 2"],
    ]);
    // A token is unique: the same one again is a bug, not a taken key, and leaves nothing.
    expect(() =>
      createWorkload(s.deps, {
        ...input("w2", null),
        firstAttempt: { allocationId: "a2", token, message: "attempt 1 of 1" },
      }),
    ).toThrow(/UNIQUE/);
    expect([s.count("workloads"), s.count("allocations"), s.count("events")]).toEqual([1, 1, 2]);
  });

  test("without a first attempt the row read back is the one returned", () => {
    const s = store();
    const created = createWorkload(s.deps, { ...input("w1", "k"), kind: "SESSION" });
    if (created.kind !== "Created") throw new Error(created.kind);
    expect(created.attempt).toBeNull();
    expect(getWorkload(s.deps, "w1")).toEqual(created.workload);
  });

  test("a taken key with a first attempt writes no attempt either", () => {
    const s = store();
    const token = mintSubmissionToken((n) => new Uint8Array(n).fill(2));
    createWorkload(s.deps, input("w1", "k"));
    const again = createWorkload(s.deps, {
      ...input("w2", "k"),
      firstAttempt: { allocationId: "a1", token, message: "attempt 1 of 1" },
    });
    expect(again.kind).toBe("KeyTaken");
    expect([s.count("workloads"), s.count("allocations"), s.count("events")]).toEqual([1, 0, 1]);
  });

  test("a taken Idempotency-Key answers KeyTaken with the holder, and writes nothing", () => {
    const s = store();
    createWorkload(s.deps, input("w1", "k", "first"));
    const again = createWorkload(s.deps, input("w2", "k", "second"));
    expect(again.kind).toBe("KeyTaken");
    if (again.kind !== "KeyTaken") return;
    expect(again.existing.workload.id).toBe("w1");
    expect(again.existing.requestHash).toBe("first");
    expect([s.count("workloads"), s.count("events")]).toEqual([1, 1]);
  });

  test("workloads without a key never collide on it", () => {
    const s = store();
    expect(createWorkload(s.deps, input("w1", null)).kind).toBe("Created");
    expect(createWorkload(s.deps, input("w2", null)).kind).toBe("Created");
  });

  test("any other conflict (an id collision) is not a taken key: it throws", () => {
    const s = store();
    createWorkload(s.deps, input("w1", "a"));
    expect(() => createWorkload(s.deps, input("w1", "b"))).toThrow(/UNIQUE/);
    expect(() => createWorkload(s.deps, input("w1", null))).toThrow(/UNIQUE/);
    expect(s.count("workloads")).toBe(1);
  });
});
