/**
 * The WAL checkpointer thread (src/adapters/store-sqlite/wal-checkpointer.ts): the daemon's commits no longer
 * checkpoint, yet the WAL stays bounded; a writer killed while checkpoints run loses no
 * commit; a thread that cannot work hands checkpointing back to the commits.
 */
import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  type OpenedDatabase,
  openDatabase,
  SQLITE_DEFAULT_AUTOCHECKPOINT_PAGES,
  startWalCheckpointer,
  type WalCheckpointer,
} from "../../src/adapters/store-sqlite/index.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { BUN, ROOT } from "../support/binary.ts";
import { eventually } from "../support/eventually.ts";
import { tempDirs } from "../support/temp-dir.ts";

const opened: OpenedDatabase[] = [];
const checkpointers: WalCheckpointer[] = [];
afterEach(async () => {
  for (const c of checkpointers.splice(0)) await c.stop();
  for (const o of opened.splice(0)) o.close();
});
const tempDir = tempDirs("o4s-walckpt-");

function store(): { path: string; db: OpenedDatabase } {
  const path = join(tempDir(), "openai4s.db");
  const db = openDatabase(path);
  opened.push(db);
  return { path, db };
}

function autocheckpointPages(db: OpenedDatabase): number {
  const row = db.sqlite.query("PRAGMA wal_autocheckpoint").values()[0] as number[];
  return row[0] as number;
}

/** One transaction of `pages` rows about a page each: at least that many WAL frames. */
function writeRound(db: OpenedDatabase, pages: number): void {
  db.sqlite.transaction(() => {
    for (let i = 0; i < pages; i++) db.sqlite.run("INSERT INTO probe VALUES (randomblob(3000))");
  })();
}

describe("the WAL checkpointer thread", () => {
  test("takes checkpointing off the connection's commits and still bounds the WAL", async () => {
    const { path, db } = store();
    db.sqlite.run("CREATE TABLE probe (b BLOB)");
    const log = memoryLog();
    // A backstop no test write reaches: whatever bounds the WAL here is the thread.
    const c = startWalCheckpointer(db.sqlite, {
      path,
      log,
      intervalMs: 5,
      backstopPages: 1_000_000,
    });
    checkpointers.push(c);
    expect(autocheckpointPages(db)).toBe(1_000_000);
    await eventually(() => c.state().kind === "Running", { what: "the thread running" });

    const roundPages = 200;
    const rounds = 12;
    for (let round = 0; round < rounds; round++) {
      writeRound(db, roundPages);
      // Two runs that end after the write: the second began after it, so it saw all of it.
      const after = c.stats().runs;
      await eventually(
        () => {
          const s = c.stats();
          return s.runs >= after + 2 && s.walFrames > 0 && s.copiedFrames === s.walFrames;
        },
        { what: `round ${round} copied into the database file` },
      );
    }
    // Each round's first transaction starts the WAL over, so the file holds about one round
    // (plus a commit or two): without the thread it would hold all twelve.
    const walBytes = statSync(`${path}-wal`).size;
    const roundBytes = roundPages * 4096;
    expect(walBytes).toBeLessThan(3 * roundBytes);
    expect(walBytes).toBeGreaterThan(0);
    const rows = db.sqlite.query("SELECT count(*) FROM probe").values()[0] as number[];
    expect(rows[0]).toBe(rounds * roundPages);
    expect(log.lines.some((l) => l.includes("failed"))).toBe(false);
  }, 60_000);

  test("a writer killed while checkpoints run loses none of the commits it reported", async () => {
    const path = join(tempDir(), "openai4s.db");
    openDatabase(path).close(); // migrated, as the daemon leaves it before the writer starts
    const child = Bun.spawn([BUN, join(ROOT, "test/support/wal-crash-writer.ts"), path], {
      stdout: "pipe",
      stderr: "pipe",
    });
    let committed = 0;
    let runs = 0;
    try {
      const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let buffered = "";
      // Killed once many commits and many checkpoints have interleaved (each run copies
      // what the commits since the last one wrote), at whatever point either is in.
      while (committed < 3000 || runs < 30) {
        const { value, done } = await lines.read();
        if (done) throw new Error(`writer ended: ${await new Response(child.stderr).text()}`);
        buffered += value;
        const complete = buffered.split("\n");
        buffered = complete.pop() ?? "";
        for (const line of complete) {
          const [what, n] = line.split(" ");
          if (what === "committed") committed = Number(n);
          if (what === "runs") runs = Number(n);
        }
      }
    } finally {
      child.kill("SIGKILL");
      await child.exited;
    }
    // Opened as the next daemon start opens it: the WAL left behind is replayed.
    const after = openDatabase(path);
    opened.push(after);
    const count = after.sqlite.query("SELECT count(*) FROM workloads").values()[0] as number[];
    expect(count[0]).toBeGreaterThanOrEqual(committed);
    const last = `w${String(committed).padStart(7, "0")}`;
    expect(after.sqlite.query("SELECT id FROM workloads WHERE id = ?").values(last)).toEqual([
      [last],
    ]);
    expect(after.sqlite.query("PRAGMA integrity_check").values()).toEqual([["ok"]]);
  }, 60_000);

  test("a thread that cannot open the store hands checkpointing back to the commits", async () => {
    const { db } = store();
    const log = memoryLog();
    const c = startWalCheckpointer(db.sqlite, {
      path: join(tempDir(), "missing", "openai4s.db"),
      log,
      intervalMs: 5,
    });
    checkpointers.push(c);
    await eventually(() => c.state().kind === "Failed", { what: "the thread failing" });
    expect(autocheckpointPages(db)).toBe(SQLITE_DEFAULT_AUTOCHECKPOINT_PAGES);
    expect(log.lines.some((l) => l.includes("WAL checkpointer thread failed"))).toBe(true);
  });

  test("stop ends the thread and closes its connection", async () => {
    const { path, db } = store();
    db.sqlite.run("CREATE TABLE probe (b BLOB)");
    const c = startWalCheckpointer(db.sqlite, { path, log: memoryLog(), intervalMs: 5 });
    await eventually(() => c.stats().runs > 0, { what: "a first run" });
    await c.stop();
    expect(c.state().kind).toBe("Stopped");
    writeRound(db, 50);
    opened.splice(opened.indexOf(db), 1);
    db.close();
    // SQLite removes the WAL when the last connection to the file closes: only if the
    // thread's connection is gone too.
    expect(existsSync(`${path}-wal`)).toBe(false);
    const other = new Database(path, { readonly: true });
    expect(other.query("SELECT count(*) FROM probe").values()).toEqual([[50]]);
    other.close();
  });
});
