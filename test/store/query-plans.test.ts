/**
 * Every list the API and /ui serve costs its page, not the store (issue 34): each query's
 * filter and order are met by an index, checked with EXPLAIN QUERY PLAN on the statements
 * the code itself builds. A plan fails when it walks the whole table or a whole index while
 * filtering (`SCAN workloads`: a page of sessions among 100,000 batch jobs read all of
 * them) or sorts (`USE TEMP B-TREE FOR ORDER BY`: every match read before the first row).
 * The lookups behind show, a page's details, a workload's own page and the view cache's
 * change check must find their rows by key: a SCAN of any table that grows with the store
 * fails them, whatever the order.
 */
import type { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { asc, eq } from "drizzle-orm";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import { pageSql } from "../../src/adapters/store-sqlite/ops/list-workload-page.ts";
import {
  ALLOCATIONS_SQL,
  BY_IDS_SQL,
  CONDITIONS_SQL,
  listSql,
  SHOW_SQL,
} from "../../src/adapters/store-sqlite/ops/workload-details.ts";
import { events } from "../../src/adapters/store-sqlite/schema.ts";

const opened = openDatabase(":memory:");
afterAll(() => opened.close());

const cursor = { createdAt: 1, id: "w" };
const at = { createdAt: 1, id: "w" };

/** Each statement with a name, and whether it filters (then it must SEARCH, not SCAN). */
const STATEMENTS: readonly { name: string; sql: string; filtered: boolean }[] = [
  { name: "API list", sql: listSql({ limit: 100 }, "id"), filtered: false },
  { name: "API list, next page", sql: listSql({ limit: 100, cursor }, "id"), filtered: false },
  { name: "API list by owner", sql: listSql({ limit: 100, owner: "ada" }, "id"), filtered: true },
  {
    name: "API list by owner, next page",
    sql: listSql({ limit: 100, owner: "ada", cursor }, "id"),
    filtered: true,
  },
  { name: "API list by kind", sql: listSql({ limit: 100, kind: "SESSION" }, "id"), filtered: true },
  {
    name: "API list by phase",
    sql: listSql({ limit: 100, phase: "RUNNING" }, "id"),
    filtered: true,
  },
  {
    name: "API list by phase, next page",
    sql: listSql({ limit: 100, phase: "RUNNING", cursor }, "id"),
    filtered: true,
  },
  {
    name: "API list by kind and phase",
    sql: listSql({ limit: 100, kind: "SESSION", phase: "RUNNING" }, "id"),
    filtered: true,
  },
  {
    name: "API list by owner and phase",
    sql: listSql({ limit: 100, owner: "ada", phase: "RUNNING" }, "id"),
    filtered: true,
  },
  { name: "/ui/sessions", sql: listSql({ limit: 200, kind: "SESSION" }, "id"), filtered: true },
  { name: "/ui/workloads", sql: pageSql({ limit: 50 }, false), filtered: false },
  {
    name: "/ui/workloads, newer page",
    sql: pageSql({ limit: 50, before: at }, true),
    filtered: false,
  },
  {
    name: "/ui/workloads?phase=RUNNING",
    sql: pageSql({ limit: 50, phase: "RUNNING" }, false),
    filtered: true,
  },
  {
    name: "/ui/workloads?phase=RUNNING, older page",
    sql: pageSql({ limit: 50, phase: "RUNNING", after: at }, false),
    filtered: true,
  },
  {
    name: "/ui/workloads?phase=RUNNING, newer page",
    sql: pageSql({ limit: 50, phase: "RUNNING", before: at }, true),
    filtered: true,
  },
  {
    name: "/ui/workloads?kind=SESSION",
    sql: pageSql({ limit: 50, kind: "SESSION" }, false),
    filtered: true,
  },
  {
    name: "/ui/workloads?kind=BATCH&phase=RUNNING",
    sql: pageSql({ limit: 50, kind: "BATCH", phase: "RUNNING" }, false),
    filtered: true,
  },
  {
    name: "/ui/workloads?profile=gpu",
    sql: pageSql({ limit: 50, profile: "gpu" }, false),
    filtered: true,
  },
  {
    name: "/ui/workloads, a principal's",
    sql: pageSql({ limit: 50, owner: "ada" }, false),
    filtered: true,
  },
];

/** Tables whose size is the store's: none may be scanned by a lookup. */
const GROWING = ["workloads", "allocations", "conditions", "events", "workload_changes"];

const LOOKUPS: readonly { name: string; sql: string }[] = [
  { name: "API show: the workload", sql: SHOW_SQL },
  {
    name: "a page's workloads by id (list misses, /ui/sessions, /ui/workloads/{id})",
    sql: BY_IDS_SQL,
  },
  { name: "a page's allocations", sql: ALLOCATIONS_SQL },
  { name: "a page's conditions", sql: CONDITIONS_SQL },
  {
    name: "API list by backend job id",
    sql: listSql({ limit: 100, backendJobId: "local-1" }, "id"),
  },
  {
    name: "/ui/workloads/{id}: its events",
    sql: opened.db
      .select()
      .from(events)
      .where(eq(events.workloadId, "w"))
      .orderBy(asc(events.id))
      .toSQL().sql,
  },
  { name: "a workload's owner (/ui access)", sql: "SELECT owner FROM workloads WHERE id = ?" },
  {
    name: "view cache: changes since the last request",
    sql: "SELECT seq, workload_id FROM workload_changes WHERE seq > ?1 ORDER BY seq",
  },
  { name: "view cache: the oldest change kept", sql: "SELECT min(seq) FROM workload_changes" },
];

function plan(sqlite: Database, sql: string): string {
  const rows = sqlite.query(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[];
  return rows.map((r) => r.detail).join("\n");
}

describe("the lists' query plans", () => {
  for (const s of STATEMENTS) {
    test(`${s.name}: an index meets its filter and its order`, () => {
      const lines = plan(opened.sqlite, s.sql);
      const sorts = lines.includes("USE TEMP B-TREE");
      const scans = s.filtered && /\bSCAN workloads\b/.test(lines);
      expect({ plan: lines, sorts, scans }).toEqual({ plan: lines, sorts: false, scans: false });
    });
  }
});

describe("the lookups' query plans", () => {
  for (const s of LOOKUPS) {
    test(`${s.name}: found by key, no table scanned`, () => {
      const lines = plan(opened.sqlite, s.sql);
      const scanned = GROWING.filter((t) => new RegExp(`\\bSCAN ${t}\\b`).test(lines));
      expect({ plan: lines, scanned }).toEqual({ plan: lines, scanned: [] });
    });
  }
});
