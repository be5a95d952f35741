/**
 * The compiled binary migrates a fresh database and an existing one. drizzle's folder
 * migrator cannot read a folder from inside a single executable, so this is checked through
 * `dist/openai4s` itself, not only from source.
 */
import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { JOURNAL_TAGS } from "../../src/adapters/store-sqlite/embedded-migrations.ts";
import { migrate } from "../../src/adapters/store-sqlite/migrate.ts";
import { BINARY, ensureBuilt } from "../support/binary.ts";
import { eventually } from "../support/eventually.ts";
import { TAGS_BEFORE_THE_RENAME } from "../support/released-migration-tags.ts";
import { tempDirs } from "../support/temp-dir.ts";

beforeAll(() => ensureBuilt(), 120_000);
// Each state dir lives in its own temp dir, so its default sibling spool goes with it.
const tempDir = tempDirs("o4s-binmig-");

/** Starts the binary's daemon on STATE, waits until it serves, stops it with SIGTERM. */
async function serveOnce(stateDir: string): Promise<string> {
  const proc = Bun.spawn([BINARY, "serve", "--state-dir", stateDir], {
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: stateDir },
  });
  const socket = join(stateDir, "api.sock");
  const answers = async () => (await fetch("http://localhost/healthz", { unix: socket })).ok;
  const healthy = await eventually(answers, { timeoutMs: 15_000, intervalMs: 50 }).catch(
    () => false,
  );
  proc.kill("SIGTERM");
  const code = await proc.exited;
  const log = await new Response(proc.stderr).text();
  expect({ healthy, code }).toEqual({ healthy: true, code: 0 });
  return log;
}

describe("the compiled binary migrates its database", () => {
  test("a fresh state dir gets every embedded migration", async () => {
    const stateDir = join(tempDir(), "state");
    const log = await serveOnce(stateDir);
    // The checkpointer thread's entrypoint is bundled (build.ts) and found from inside the
    // binary: else the daemon logs that it failed and checkpoints in its commits again.
    expect(log).toContain("WAL checkpoints run on a thread of their own");
    expect(log).not.toContain("WAL checkpointer thread failed");
    const db = new Database(join(stateDir, "openai4s.db"), { readonly: true });
    const tags = db.query<{ tag: string }, []>("SELECT tag FROM openai4s_migrations").all();
    expect(tags.map((t) => t.tag)).toEqual([...JOURNAL_TAGS]);
    const tables = db
      .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table'")
      .all()
      .map((t) => t.name);
    expect(tables).toEqual(expect.arrayContaining(["workloads", "allocations", "events"]));
    db.close();
  }, 60_000);

  test("an existing database keeps its rows across a restart of the binary", async () => {
    const stateDir = join(tempDir(), "state");
    await serveOnce(stateDir);
    const path = join(stateDir, "openai4s.db");
    const writer = new Database(path);
    writer.run(
      "INSERT INTO workloads (id, kind, name, profile, spec_json, phase, reason, created_at, updated_at) VALUES ('w-kept','BATCH','kept','default','{\"command\":[\"true\"]}','COMPLETED','EXITED_ZERO',1,1)",
    );
    writer.close();
    await serveOnce(stateDir);
    const db = new Database(path, { readonly: true });
    expect(db.query("SELECT id, phase FROM workloads WHERE id = 'w-kept'").all()).toEqual([
      { id: "w-kept", phase: "COMPLETED" },
    ]);
    expect(db.query("SELECT COUNT(*) AS n FROM openai4s_migrations").get()).toEqual({
      n: JOURNAL_TAGS.length,
    });
    db.close();
  }, 60_000);

  test("a database migrated under the migrations' old names opens and keeps its rows", async () => {
    const stateDir = join(tempDir(), "state");
    await serveOnce(stateDir);
    const path = join(stateDir, "openai4s.db");
    // Rebuilt as a release before the rename left it: every migration under its old tag.
    const old = new Database(path);
    old.run("DROP TABLE openai4s_migrations");
    migrate(
      old,
      TAGS_BEFORE_THE_RENAME.map((tag) => ({ tag, sql: "" })),
    );
    old.run(
      "INSERT INTO workloads (id, kind, name, profile, spec_json, phase, reason, created_at, updated_at) VALUES ('w-old','BATCH','old','default','{\"command\":[\"true\"]}','COMPLETED','EXITED_ZERO',1,1)",
    );
    old.close();
    await serveOnce(stateDir);
    const db = new Database(path, { readonly: true });
    expect(db.query("SELECT id FROM workloads WHERE id = 'w-old'").all()).toEqual([
      { id: "w-old" },
    ]);
    const tags = db.query<{ tag: string }, []>("SELECT tag FROM openai4s_migrations").all();
    expect(tags.map((t) => t.tag)).toEqual(expect.arrayContaining([...JOURNAL_TAGS]));
    db.close();
  }, 60_000);
});
