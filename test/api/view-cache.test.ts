/**
 * The API's cache of serialized workload views: after any sequence of writes (by the store
 * ops the daemon uses, by raw SQL on a second connection, with the change log pruned under
 * it), every list page and every show it answers equals a fresh read of the store.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import fc from "fast-check";
import {
  applyTransitions,
  createWorkload,
  getWorkload,
  getWorkloadDetails,
  latestWorkloadChangeEver,
  listAllocations,
  listWorkloadDetails,
  mintAttempts,
  openDatabase,
  pruneWorkloadChanges,
  requestStop,
  type StoreDeps,
  setCondition,
  touchActivity,
} from "../../src/adapters/store-sqlite/index.ts";
import { CONDITION_TYPES, mintSubmissionToken, PHASES } from "../../src/core/models.ts";
import { manualClock } from "../../src/lib/clock.ts";
import {
  createWorkloadViewCache,
  serializeWorkload,
} from "../../src/servers/http/workloads/view-cache.ts";
import { tempDirs } from "../support/temp-dir.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.reverse()) c();
  cleanups = [];
});
// After the hook above (hooks run in order): the databases close before their dir goes.
const tempDir = tempDirs("o4s-view-cache-", "each");

function twoConnections() {
  const dir = tempDir();
  const path = join(dir, "openai4s.db");
  const a = openDatabase(path);
  const b = openDatabase(path);
  cleanups.push(() => a.close());
  cleanups.push(() => b.close());
  const clock = manualClock();
  return { deps: { db: a.db, clock } as StoreDeps, other: { db: b.db, clock } as StoreDeps, clock };
}

const Op = fc.oneof(
  fc.record({ op: fc.constant("create" as const), session: fc.boolean() }),
  fc.record({ op: fc.constant("mint" as const), pick: fc.nat() }),
  fc.record({
    op: fc.constant("move" as const),
    pick: fc.nat(),
    phase: fc.constantFrom("QUEUED" as const, "RUNNING" as const, "COMPLETED" as const),
  }),
  fc.record({
    op: fc.constant("condition" as const),
    pick: fc.nat(),
    type: fc.constantFrom(...CONDITION_TYPES),
    status: fc.constantFrom("TRUE" as const, "FALSE" as const),
  }),
  fc.record({ op: fc.constant("stop" as const), pick: fc.nat() }),
  fc.record({ op: fc.constant("touch" as const), pick: fc.nat() }),
  fc.record({ op: fc.constant("rawMessage" as const), pick: fc.nat(), text: fc.string() }),
  fc.record({ op: fc.constant("rawDeleteConditions" as const), pick: fc.nat() }),
  fc.record({ op: fc.constant("prune" as const), all: fc.boolean() }),
  fc.record({ op: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 2_500 }) }),
  // Reads between writes fill the cache; several writes between two reads (and a prune
  // among them) is what makes the cache miss a change if it can.
  fc.record({ op: fc.constant("read" as const) }),
);

describe("workload view cache", () => {
  test("cached list pages and shows equal a fresh read after any writes", () => {
    fc.assert(
      fc.property(
        fc.array(Op, { maxLength: 60 }),
        fc.integer({ min: 1, max: 6 }),
        fc.option(fc.constantFrom(...PHASES), { nil: undefined }),
        (ops, limit, phase) => {
          const { deps, other, clock } = twoConnections();
          const cache = createWorkloadViewCache(deps, { maxEntries: 7 });
          const ids: string[] = [];
          let n = 0;
          const random = (k: number) => Uint8Array.from({ length: k }, () => (n++ * 37) & 0xff);
          const pick = (i: number) => ids[i % Math.max(1, ids.length)];

          const check = () => {
            let cursor: { createdAt: number; id: string } | undefined;
            for (let pages = 0; pages < 20; pages++) {
              const q = { limit, ...(phase ? { phase } : {}), ...(cursor ? { cursor } : {}) };
              const fresh = listWorkloadDetails(deps, q);
              const cached = cache.list(q);
              expect(cached.next).toEqual(fresh.next);
              expect([...cached.items]).toEqual(
                fresh.items.map((d) => serializeWorkload(d, deps.clock.now())),
              );
              if (!fresh.next) break;
              cursor = fresh.next;
            }
            for (const id of [...ids, "no-such-workload"]) {
              const d = getWorkloadDetails(deps, id);
              expect(cache.show(id)).toEqual(
                d === null ? null : serializeWorkload(d, deps.clock.now()),
              );
            }
          };

          for (const o of ops) {
            const id = pick("pick" in o ? o.pick : 0);
            switch (o.op) {
              case "create": {
                const newId = `w${String(ids.length).padStart(3, "0")}`;
                createWorkload(deps, {
                  id: newId,
                  kind: o.session ? "SESSION" : "BATCH",
                  name: newId,
                  profile: "default",
                  spec: { command: ["true"] },
                  maxAttempts: 3,
                  idempotencyKey: null,
                  requestHash: null,
                });
                ids.push(newId);
                break;
              }
              case "mint": {
                const w = id === undefined ? null : getWorkload(deps, id);
                if (w) {
                  mintAttempts(deps, [
                    {
                      workloadId: w.id,
                      allocationId: `${w.id}-a${w.executionEpoch + 1}`,
                      token: mintSubmissionToken(random),
                      expectedEpoch: w.executionEpoch,
                      message: "minted",
                    },
                  ]);
                }
                break;
              }
              case "move": {
                const w = id === undefined ? null : getWorkload(deps, id);
                const a = w ? listAllocations(deps, w.id).at(-1) : undefined;
                if (w && a) {
                  applyTransitions(deps, [
                    {
                      allocation: {
                        id: a.id,
                        expectedPhase: a.phase,
                        phase: o.phase,
                        reason: null,
                        message: `now ${o.phase}`,
                        // With an end time a few ms ahead: "advance" then moves TIME_REMAINING
                        // of cached entries, which must still equal a fresh read.
                        ...(o.phase === "RUNNING"
                          ? { startedAt: clock.now(), deadlineAt: clock.now() + 4_000 }
                          : {}),
                      },
                      workload: {
                        id: w.id,
                        expectedPhase: w.phase,
                        expectedEpoch: w.executionEpoch,
                        phase: o.phase,
                        reason: null,
                        message: `now ${o.phase}`,
                      },
                    },
                  ]);
                }
                break;
              }
              case "condition":
                if (id !== undefined) {
                  setCondition(deps, id, {
                    type: o.type,
                    status: o.status,
                    reason: "R",
                    message: "m",
                  });
                }
                break;
              case "stop":
                if (id !== undefined) requestStop(deps, id, "USER_CANCELLED", "stop");
                break;
              case "touch":
                if (id !== undefined) touchActivity(deps, id);
                break;
              case "rawMessage":
                // Another connection, outside every store op: only the triggers can tell.
                other.db.$client
                  .query("UPDATE workloads SET message = ? WHERE id = ?")
                  .run(o.text, id ?? "");
                break;
              case "rawDeleteConditions":
                other.db.$client
                  .query("DELETE FROM conditions WHERE workload_id = ?")
                  .run(id ?? "");
                break;
              case "prune": {
                // As the reconciler's live view does, possibly past what the cache has seen.
                const latest = latestWorkloadChangeEver(deps);
                pruneWorkloadChanges(deps, o.all ? latest : Math.floor(latest / 2));
                break;
              }
              case "advance":
                clock.advance(o.ms);
                break;
              case "read":
                check();
                break;
              default: {
                const never: never = o;
                throw new Error(`unhandled op ${JSON.stringify(never)}`);
              }
            }
          }
          check();
        },
      ),
      { numRuns: 150 },
    );
  });

  test("an unchanged workload is served from the cache, a changed one is read again", () => {
    const { deps, other } = twoConnections();
    const cache = createWorkloadViewCache(deps);
    createWorkload(deps, {
      id: "w1",
      kind: "BATCH",
      name: "w1",
      profile: "default",
      spec: { command: ["true"] },
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
    });
    const first = cache.show("w1");
    expect(cache.size()).toBe(1);
    // Same text object: nothing was serialized again.
    expect(cache.show("w1")).toBe(first as string);
    other.db.$client.query("UPDATE workloads SET message = 'changed' WHERE id = 'w1'").run();
    const after = cache.show("w1");
    expect(after).not.toBe(first as string);
    expect(JSON.parse(after ?? "null").message).toBe("changed");
  });

  test("a page served again after a change anywhere is read again, not from its held ids", () => {
    const { deps, other } = twoConnections();
    const cache = createWorkloadViewCache(deps);
    for (const id of ["w1", "w2"]) {
      createWorkload(deps, {
        id,
        kind: "BATCH",
        name: id,
        profile: "default",
        spec: { command: ["true"] },
        maxAttempts: 1,
        idempotencyKey: null,
        requestHash: null,
      });
    }
    other.db.$client.query("UPDATE workloads SET phase = 'RUNNING' WHERE id = 'w1'").run();
    const running = () =>
      cache.list({ limit: 10, phase: "RUNNING" }).items.map((t) => JSON.parse(t).id);
    expect(running()).toEqual(["w1"]);
    // w2 joins the filtered page; its entry is evicted, but the page held names only w1.
    other.db.$client.query("UPDATE workloads SET phase = 'RUNNING' WHERE id = 'w2'").run();
    // Another query catches the cache up with the change first: the held page must go too.
    expect(cache.list({ limit: 10 }).items).toHaveLength(2);
    expect(running()).toEqual(["w2", "w1"]);
  });

  test.each(["list", "show"] as const)(
    "a condition-only change (insert, update, delete) evicts what %s serves",
    (read) => {
      // Nothing else of the workload row changes with a condition: only the conditions table's
      // own triggers can tell the cache, through any connection.
      const { deps, other } = twoConnections();
      const cache = createWorkloadViewCache(deps);
      createWorkload(deps, {
        id: "w1",
        kind: "SESSION",
        name: "w1",
        profile: "default",
        spec: { command: ["true"] },
        maxAttempts: 1,
        idempotencyKey: null,
        requestHash: null,
      });
      // Each answer through one path only: list and show each sync the cache themselves.
      const ready = () => {
        const text = read === "list" ? cache.list({ limit: 10 }).items[0] : cache.show("w1");
        const conditions: { type: string; status: string }[] = JSON.parse(
          text ?? "null",
        ).conditions;
        expect(cache.size()).toBe(1);
        return conditions.find((c) => c.type === "READY")?.status ?? null;
      };
      expect(ready()).not.toBe("TRUE");
      setCondition(deps, "w1", { type: "READY", status: "TRUE", reason: "R", message: "m" });
      expect(ready()).toBe("TRUE");
      setCondition(deps, "w1", { type: "READY", status: "FALSE", reason: "R", message: "m" });
      expect(ready()).toBe("FALSE");
      other.db.$client
        .query("UPDATE conditions SET status = 'TRUE' WHERE workload_id = 'w1'")
        .run();
      expect(ready()).toBe("TRUE");
      other.db.$client.query("DELETE FROM conditions WHERE workload_id = 'w1'").run();
      expect(ready()).toBe("UNKNOWN");
    },
  );

  test("a prune that removed exactly one unseen change still drops the cache", () => {
    // Seen up to S; changes S+1 (w1) and S+2 (w2); pruned up to S+1. The oldest change left
    // is S+2: one change is gone, and with it the only news that w1 changed.
    const { deps, other } = twoConnections();
    const cache = createWorkloadViewCache(deps);
    for (const id of ["w1", "w2"]) {
      createWorkload(deps, {
        id,
        kind: "BATCH",
        name: id,
        profile: "default",
        spec: { command: ["true"] },
        maxAttempts: 1,
        idempotencyKey: null,
        requestHash: null,
      });
    }
    cache.list({ limit: 10 });
    expect(cache.size()).toBe(2);
    const seen = latestWorkloadChangeEver(deps);
    other.db.$client.query("UPDATE workloads SET message = 'w1 moved' WHERE id = 'w1'").run();
    other.db.$client.query("UPDATE workloads SET message = 'w2 moved' WHERE id = 'w2'").run();
    expect(latestWorkloadChangeEver(deps)).toBe(seen + 2);
    pruneWorkloadChanges(deps, seen + 1);
    expect(JSON.parse(cache.show("w1") ?? "null").message).toBe("w1 moved");
    expect(JSON.parse(cache.show("w2") ?? "null").message).toBe("w2 moved");
  });

  test("TIME_REMAINING of a held entry follows the clock, not the moment it was cached", () => {
    const { deps, clock } = twoConnections();
    const cache = createWorkloadViewCache(deps);
    createWorkload(deps, {
      id: "w1",
      kind: "BATCH",
      name: "w1",
      profile: "default",
      spec: { command: ["true"] },
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
    });
    const token = mintSubmissionToken((k) => new Uint8Array(k));
    mintAttempts(deps, [
      { workloadId: "w1", allocationId: "a1", token, expectedEpoch: 0, message: "minted" },
    ]);
    const start = clock.now();
    applyTransitions(deps, [
      {
        allocation: {
          id: "a1",
          expectedPhase: "SUBMITTING",
          phase: "RUNNING",
          reason: "STARTED",
          message: "running",
          startedAt: start,
          deadlineAt: start + 600_000,
        },
        workload: {
          id: "w1",
          expectedPhase: "SUBMITTING",
          expectedEpoch: 1,
          phase: "RUNNING",
          reason: "STARTED",
          message: "running",
        },
      },
    ]);
    const remaining = () => JSON.parse(cache.show("w1") ?? "null").timeRemainingSeconds;
    const listed = () =>
      JSON.parse(cache.list({ limit: 10 }).items[0] ?? "null").timeRemainingSeconds;
    expect(remaining()).toBe(600);
    expect(listed()).toBe(600);
    clock.advance(61_500);
    // Nothing changed in the store: both answers come from held entries.
    expect(cache.size()).toBe(1);
    expect(remaining()).toBe(538);
    expect(listed()).toBe(538);
    expect(cache.show("w1")).toBe(
      serializeWorkload(getWorkloadDetails(deps, "w1") ?? fail(), clock.now()),
    );
  });

  test("phaseConfirmedAt of a held running entry follows the reconciler, not the moment it was cached", () => {
    const { deps, clock } = twoConnections();
    // Heard from the backend after the entry was cached: no store write says so.
    let heard: number | null = null;
    const cache = createWorkloadViewCache(deps, { confirmed: () => heard });
    createWorkload(deps, {
      id: "w1",
      kind: "BATCH",
      name: "w1",
      profile: "default",
      spec: { command: ["true"] },
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
    });
    const token = mintSubmissionToken((k) => new Uint8Array(k));
    mintAttempts(deps, [
      { workloadId: "w1", allocationId: "a1", token, expectedEpoch: 0, message: "minted" },
    ]);
    // Running with no deadline: only the confirmation can move without a write.
    applyTransitions(deps, [
      {
        allocation: {
          id: "a1",
          expectedPhase: "SUBMITTING",
          phase: "RUNNING",
          reason: "STARTED",
          message: "running",
          startedAt: clock.now(),
        },
        workload: {
          id: "w1",
          expectedPhase: "SUBMITTING",
          expectedEpoch: 1,
          phase: "RUNNING",
          reason: "STARTED",
          message: "running",
        },
      },
    ]);
    const shown = () => JSON.parse(cache.show("w1") ?? "null").phaseConfirmedAt;
    const listed = () => JSON.parse(cache.list({ limit: 10 }).items[0] ?? "null").phaseConfirmedAt;
    expect(shown()).toBeNull();
    expect(listed()).toBeNull();
    clock.advance(5_000);
    heard = clock.now();
    expect(cache.size()).toBe(1);
    expect(shown()).toBe(new Date(heard).toISOString());
    expect(listed()).toBe(new Date(heard).toISOString());
  });

  test("a change pruned from the log before the cache saw it still evicts (everything)", () => {
    const { deps, other } = twoConnections();
    const cache = createWorkloadViewCache(deps);
    for (const id of ["w1", "w2"]) {
      createWorkload(deps, {
        id,
        kind: "SESSION",
        name: id,
        profile: "default",
        spec: { command: ["true"] },
        maxAttempts: 1,
        idempotencyKey: null,
        requestHash: null,
      });
    }
    setCondition(deps, "w1", { type: "READY", status: "TRUE", reason: "R", message: "m" });
    const before = cache.show("w1");
    expect(JSON.parse(before ?? "null").conditions).toContainEqual(
      expect.objectContaining({ type: "READY", status: "TRUE" }),
    );
    cache.show("w2");
    other.db.$client.query("DELETE FROM conditions WHERE workload_id = 'w1'").run();
    pruneWorkloadChanges(deps, latestWorkloadChangeEver(deps));
    const after = cache.show("w1");
    expect(after).toBe(
      serializeWorkload(getWorkloadDetails(deps, "w1") ?? fail(), deps.clock.now()),
    );
    expect(after).not.toBe(before as string);
    expect(cache.size()).toBe(1);
  });
});

function fail(): never {
  throw new Error("missing");
}
