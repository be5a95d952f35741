import { describe, expect, test } from "bun:test";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import { ACTIVE_ALLOCATION_PHASES, TERMINAL_PHASES } from "../../src/core/models.ts";

function indexSql(sqlite: ReturnType<typeof openDatabase>["sqlite"]): string {
  const row = sqlite
    .query<{ sql: string }, []>(
      "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'allocations_one_active_per_workload'",
    )
    .get();
  if (!row) throw new Error("the partial unique index is missing");
  return row.sql;
}

function insertWorkload(sqlite: ReturnType<typeof openDatabase>["sqlite"], id: string) {
  sqlite.run(
    "INSERT INTO workloads (id, kind, name, profile, spec_json, phase, created_at, updated_at) VALUES (?, 'BATCH', ?, 'default', '{}', 'PENDING', 1, 1)",
    [id, id],
  );
}

let seq = 0;
function insertAllocation(
  sqlite: ReturnType<typeof openDatabase>["sqlite"],
  workloadId: string,
  epoch: number,
  phase: string,
) {
  seq += 1;
  sqlite.run(
    "INSERT INTO allocations (id, workload_id, epoch, token, phase, created_at) VALUES (?, ?, ?, ?, ?, 1)",
    [`a${seq}`, workloadId, epoch, `o4s-${String(seq).padStart(26, "0")}`, phase],
  );
}

describe("allocations_one_active_per_workload", () => {
  test("its phase list is exactly ACTIVE_ALLOCATION_PHASES", () => {
    const db = openDatabase(":memory:");
    try {
      const sql = indexSql(db.sqlite);
      expect(sql).toMatch(/^CREATE UNIQUE INDEX/);
      expect(sql).toContain("(`workload_id`)");
      // Since migration 0006 the list is a chain of `phase = '...'` joined by OR (an IN list
      // costs SQLite a temporary table on every UPDATE that sets phase): nothing else may hide in it.
      const where = /\sWHERE\s+(.*)$/is.exec(sql)?.[1];
      if (!where) throw new Error(`no predicate in ${sql}`);
      const terms = where.split(/\s+OR\s+/i);
      const listed = terms.map((term) => {
        const m = /^(?:"allocations"\.)?"?phase"?\s*=\s*'([A-Z_]+)'$/i.exec(term.trim());
        if (!m?.[1]) throw new Error(`not a phase equality: ${term}`);
        return m[1];
      });
      expect([...listed].sort()).toEqual([...ACTIVE_ALLOCATION_PHASES].sort());
      expect(listed).toHaveLength(new Set(listed).size);
    } finally {
      db.close();
    }
  });

  test("SQLite refuses a second active allocation, in every pair of active phases", () => {
    const db = openDatabase(":memory:");
    try {
      for (const first of ACTIVE_ALLOCATION_PHASES) {
        for (const second of ACTIVE_ALLOCATION_PHASES) {
          const w = `w-${first}-${second}`;
          insertWorkload(db.sqlite, w);
          insertAllocation(db.sqlite, w, 1, first);
          expect(() => insertAllocation(db.sqlite, w, 2, second)).toThrow(
            /UNIQUE constraint failed/,
          );
        }
      }
    } finally {
      db.close();
    }
  });

  test("ended attempts do not count: any number of terminal ones beside one active", () => {
    const db = openDatabase(":memory:");
    try {
      insertWorkload(db.sqlite, "w");
      let epoch = 0;
      for (const phase of TERMINAL_PHASES) insertAllocation(db.sqlite, "w", ++epoch, phase);
      insertAllocation(db.sqlite, "w", ++epoch, "RUNNING");
      // An UPDATE into an active phase is refused as well, not only an INSERT.
      expect(() =>
        db.sqlite.run(
          "UPDATE allocations SET phase = 'QUEUED' WHERE workload_id = 'w' AND epoch = 1",
        ),
      ).toThrow(/UNIQUE constraint failed/);
    } finally {
      db.close();
    }
  });
});
