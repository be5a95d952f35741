import { describe, expect, test } from "bun:test";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import {
  LIVE_PHASES_SQL,
  SNAPSHOT_SQL,
} from "../../src/adapters/store-sqlite/ops/load-reconcile-snapshot.ts";
import { PHASES, TERMINAL_PHASES } from "../../src/core/models.ts";

const terminal: ReadonlySet<string> = new Set(TERMINAL_PHASES);

describe("workloads_live (the reconciler's every-tick read)", () => {
  test("its phase list is exactly the non-terminal phases, as the snapshot statement writes them", () => {
    const db = openDatabase(":memory:");
    try {
      const row = db.sqlite
        .query<{ sql: string }, []>(
          "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'workloads_live'",
        )
        .get();
      if (!row) throw new Error("the partial index workloads_live is missing");
      expect(row.sql).toContain("(`created_at`,`id`)");
      // Since migration 0006 the list is a chain of `phase = '...'` joined by OR (an IN list
      // costs SQLite a temporary table on every UPDATE that sets phase): nothing else may hide in it.
      const where = /\sWHERE\s+(.*)$/is.exec(row.sql)?.[1];
      if (!where) throw new Error(`no predicate in ${row.sql}`);
      const terms = where.split(/\s+OR\s+/i);
      const listed = terms.map((term) => {
        const m = /^(?:"workloads"\.)?"?phase"?\s*=\s*'([A-Z_]+)'$/i.exec(term.trim());
        if (!m?.[1]) throw new Error(`not a phase equality: ${term}`);
        return m[1];
      });
      const live = PHASES.filter((p) => !terminal.has(p));
      expect([...listed].sort()).toEqual([...live].sort());
      expect(LIVE_PHASES_SQL.split(",").map((p) => p.replace(/^'|'$/g, ""))).toEqual(live);
    } finally {
      db.close();
    }
  });

  test("the snapshot walks the partial index in order: no sort, no scan of terminal history", () => {
    const db = openDatabase(":memory:");
    try {
      const plan = db.sqlite
        .query<{ detail: string }, []>(`EXPLAIN QUERY PLAN ${SNAPSHOT_SQL}`)
        .all()
        .map((r) => r.detail);
      expect(plan.some((d) => d.includes("USING INDEX workloads_live"))).toBe(true);
      expect(plan.some((d) => d.includes("TEMP B-TREE"))).toBe(false);
    } finally {
      db.close();
    }
  });
});
