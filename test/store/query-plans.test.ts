/**
 * Every list the API and /ui serve costs its page, not the store (issue 34): each query's
 * filter and order are met by an index, checked with EXPLAIN QUERY PLAN on the statements
 * the code itself builds. A plan fails when it walks the whole table or a whole index while
 * filtering (`SCAN workloads`: a page of sessions among 100,000 batch jobs read all of
 * them) or sorts (`USE TEMP B-TREE FOR ORDER BY`: every match read before the first row).
 */
import type { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import { pageSql } from "../../src/adapters/store-sqlite/ops/list-workload-page.ts";
import { listSql } from "../../src/adapters/store-sqlite/ops/workload-details.ts";

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
