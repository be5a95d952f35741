import { afterEach, describe, expect, test } from "bun:test";
import { manualClock } from "../../src/clock.ts";
import type { CreateWorkloadInput } from "../../src/orchestration/ports/admission-store.ts";
import { createWorkload, openDatabase, type StoreDeps } from "../../src/store/index.ts";

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
