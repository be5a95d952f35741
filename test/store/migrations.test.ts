import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  EMBEDDED_MIGRATIONS,
  JOURNAL_TAGS,
} from "../../src/adapters/store-sqlite/embedded-migrations.ts";
import { migrate } from "../../src/adapters/store-sqlite/migrate.ts";
import { TAGS_BEFORE_THE_RENAME } from "../support/released-migration-tags.ts";
import { tempDirs } from "../support/temp-dir.ts";

const MIGRATIONS_DIR = join(
  import.meta.dir,
  "..",
  "..",
  "src",
  "adapters",
  "store-sqlite",
  "migrations",
);

describe("embedded migrations", () => {
  test("every journal entry is embedded, in order, with the file's exact text", () => {
    expect(EMBEDDED_MIGRATIONS.map((m) => m.tag)).toEqual([...JOURNAL_TAGS]);
    for (const m of EMBEDDED_MIGRATIONS) {
      expect(m.sql).toBe(readFileSync(join(MIGRATIONS_DIR, `${m.tag}.sql`), "utf8"));
    }
  });

  test("no .sql file on disk is left out of the journal", () => {
    const files = readdirSync(MIGRATIONS_DIR)
      .filter((f) => f.endsWith(".sql"))
      .map((f) => f.replace(/\.sql$/, ""));
    expect(files.sort()).toEqual([...JOURNAL_TAGS].sort());
  });
});

describe("migrate", () => {
  const newDir = tempDirs("o4s-migrate-", "each");
  function dbPath(): string {
    const dir = newDir();
    return join(dir, "openai4s.db");
  }

  test("a fresh database gets every migration once; a second run applies nothing", () => {
    const path = dbPath();
    const first = new Database(path);
    expect(migrate(first).applied).toEqual([...JOURNAL_TAGS]);
    first.close();
    const second = new Database(path);
    const report = migrate(second);
    expect(report.applied).toEqual([]);
    expect(report.alreadyApplied).toEqual([...JOURNAL_TAGS]);
    second.close();
  });

  test("an existing database keeps its rows when a later migration is applied", () => {
    const path = dbPath();
    const db = new Database(path);
    migrate(db);
    db.run(
      "INSERT INTO workloads (id, kind, name, profile, spec_json, phase, created_at, updated_at) VALUES ('w1','BATCH','n','default','{}','PENDING',1,1)",
    );
    const later = [
      ...EMBEDDED_MIGRATIONS,
      { tag: "9999_test_column", sql: "ALTER TABLE `workloads` ADD `note` text;" },
    ];
    expect(migrate(db, later).applied).toEqual(["9999_test_column"]);
    expect(db.query("SELECT id, note FROM workloads").all()).toEqual([{ id: "w1", note: null }]);
    db.close();
  });

  test("a failing migration rolls back whole and is not recorded", () => {
    const path = dbPath();
    const db = new Database(path);
    migrate(db);
    const broken = [
      ...EMBEDDED_MIGRATIONS,
      {
        tag: "9998_broken",
        sql: "CREATE TABLE t1 (x int);\n--> statement-breakpoint\nTHIS IS NOT SQL;",
      },
    ];
    expect(() => migrate(db, broken)).toThrow();
    expect(db.query("SELECT name FROM sqlite_master WHERE name = 't1'").all()).toEqual([]);
    expect(db.query("SELECT tag FROM openai4s_migrations WHERE tag = '9998_broken'").all()).toEqual(
      [],
    );
    db.close();
  });

  test("a database that applied the migrations under their old names neither re-runs nor skips one", () => {
    const path = dbPath();
    const db = new Database(path);
    const asReleased = EMBEDDED_MIGRATIONS.map((m, i) => ({
      tag: TAGS_BEFORE_THE_RENAME[i] ?? "",
      sql: m.sql,
    }));
    expect(migrate(db, asReleased).applied).toEqual([...TAGS_BEFORE_THE_RENAME]);
    db.run(
      "INSERT INTO workloads (id, kind, name, profile, spec_json, phase, created_at, updated_at) VALUES ('w1','BATCH','n','default','{}','PENDING',1,1)",
    );
    const report = migrate(db);
    expect(report).toEqual({ applied: [], alreadyApplied: [...JOURNAL_TAGS] });
    const tags = db.query<{ tag: string }, []>("SELECT tag FROM openai4s_migrations").all();
    // The new names are recorded and the old rows kept (a rollback to the old binary).
    expect(tags.map((t) => t.tag).sort()).toEqual(
      [...new Set([...TAGS_BEFORE_THE_RENAME, ...JOURNAL_TAGS])].sort(),
    );
    expect(db.query("SELECT id FROM workloads").all()).toEqual([{ id: "w1" }]);
    // A later migration still applies, once.
    const later = [...EMBEDDED_MIGRATIONS, { tag: "9999_after", sql: "CREATE TABLE t2 (x int);" }];
    expect(migrate(db, later).applied).toEqual(["9999_after"]);
    db.close();
  });
});
