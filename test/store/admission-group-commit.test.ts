/**
 * Admission's store commits the submissions of one moment together (issue 34): a burst of
 * POSTs was answered one fsync after another. Held here through the real rule
 * (admitWorkload) over the real SQLite adapter: one commit for a burst, nothing answered
 * before it is durable, per-principal limits exact, an Idempotency-Key replay still a
 * replay, and one submission's own failure failing it alone.
 */
import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import { bindAdmissionStore } from "../../src/adapters/store-sqlite/stores/admission-store.ts";
import { admitWorkload, type Submission, type Submitter } from "../../src/core/admission.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { fakeBackend } from "../support/fake-backend.ts";
import { tempDirs } from "../support/temp-dir.ts";

const dirs = tempDirs("o4s-group-commit-");
const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

const batch: Submission = {
  kind: "BATCH",
  profile: "default",
  name: "echo",
  spec: { command: ["echo", "hi"] },
  maxAttempts: 1,
};

/** A file-backed store (as the daemon's), counting the transactions begun at the top level. */
function world(flushAt?: () => Promise<void>) {
  const path = join(dirs(), "openai4s.db");
  const opened = openDatabase(path);
  closers.push(() => opened.close());
  const sqlite = opened.db.$client;
  let commits = 0;
  const counting = new Proxy(sqlite, {
    get(target, key) {
      if (key !== "transaction") {
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      }
      return (fn: (...args: unknown[]) => unknown) => {
        const run = target.transaction(fn);
        return (...args: unknown[]) => {
          if (!target.inTransaction) commits += 1;
          return run(...args);
        };
      };
    },
  });
  const db = Object.create(opened.db, { $client: { value: counting } });
  const store = bindAdmissionStore({ db, clock: manualClock() }, flushAt ? { flushAt } : {});
  let seq = 0;
  const other = new Database(path, { readonly: true });
  closers.push(() => other.close());
  const durableRows = () =>
    (other.query("SELECT count(*) AS n FROM workloads").get() as { n: number }).n;
  const deps = (newWorkloadId: () => string = () => `w${++seq}`) => ({
    store,
    backend: fakeBackend(),
    newWorkloadId,
  });
  return { deps, durableRows, commits: () => commits };
}

describe("admission's group commit", () => {
  test("a hundred submissions at once are one commit, and none is answered before it", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const w = world(() => gate);
    let answered = 0;
    const all = Array.from({ length: 100 }, () =>
      admitWorkload(w.deps(), batch, null).then((o) => {
        answered += 1;
        return o;
      }),
    );
    await Promise.resolve();
    expect([answered, w.durableRows()]).toEqual([0, 0]);
    open();
    const outcomes = await Promise.all(all);
    expect(outcomes.every((o) => o.kind === "Admitted")).toBe(true);
    expect([w.durableRows(), w.commits()]).toEqual([100, 1]);
  });

  test("1,000 at once from 10 principals with limits: each holds exactly its limit", async () => {
    const w = world();
    const principals = Array.from({ length: 10 }, (_, i) => ({
      owner: `p${i}`,
      limits: { maxSessions: 0, maxBatch: i + 3, maxCpus: 1000, maxGpus: 0 },
    }));
    const outcomes = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => {
        const p = principals[i % 10] as Submitter;
        return admitWorkload(w.deps(), batch, null, p).then((o) => ({ owner: p.owner, o }));
      }),
    );
    for (const [i, p] of principals.entries()) {
      const mine = outcomes.filter((x) => x.owner === p.owner);
      const admitted = mine.filter((x) => x.o.kind === "Admitted").length;
      const over = mine.filter((x) => x.o.kind === "Refused" && x.o.reason === "OVER_LIMIT");
      expect([p.owner, admitted, over.length]).toEqual([p.owner, i + 3, 100 - (i + 3)]);
    }
    expect(w.durableRows()).toBe(principals.reduce((n, _, i) => n + i + 3, 0));
  });

  test("one Idempotency-Key sent twice at once: one workload, the other a replay of it", async () => {
    const w = world();
    const [a, b] = await Promise.all([
      admitWorkload(w.deps(), batch, "sweep-17"),
      admitWorkload(w.deps(), batch, "sweep-17"),
    ]);
    expect([a?.kind, b?.kind]).toEqual(["Admitted", "Replayed"]);
    const id = (o: typeof a) => (o !== undefined && o.kind !== "Refused" ? o.workload.id : "");
    expect(id(b)).toBe(id(a));
    const [c, d] = await Promise.all([
      admitWorkload(w.deps(), batch, "k2"),
      admitWorkload(w.deps(), { ...batch, name: "other" }, "k2"),
    ]);
    expect([c?.kind, d?.kind === "Refused" && d.reason]).toEqual([
      "Admitted",
      "IDEMPOTENCY_KEY_REUSED",
    ]);
    expect(w.durableRows()).toBe(2);
  });

  test("a submission whose own insert fails fails alone; the rest of its group commits", async () => {
    const w = world();
    const ids = ["same", "fine-1", "same", "fine-2"];
    const outcomes = await Promise.allSettled(
      ids.map((id) =>
        admitWorkload(
          w.deps(() => id),
          batch,
          null,
        ),
      ),
    );
    expect(outcomes.map((o) => o.status)).toEqual([
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
    ]);
    expect([w.durableRows(), w.commits()]).toEqual([3, 1]);
  });
});
