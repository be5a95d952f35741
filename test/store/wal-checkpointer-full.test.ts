/**
 * A checkpoint that finds the disk full (issue 33): the thread ended at the first one, and
 * the store checkpointed in its commits until the next restart, long after space returned.
 * On a small tmpfs (root only, to mount it): a run that finds no room is logged once with
 * the store's path, the thread goes on, and once space returns it checkpoints again.
 * Seen failing (state Failed) with the worker ending on any error, as before.
 */
import { describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openDatabase, startWalCheckpointer } from "../../src/adapters/store-sqlite/index.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { eventually } from "../support/eventually.ts";
import { tempDir } from "../support/temp-dir.ts";
import { fillFilesystem, mountTmpfs } from "../support/tmpfs.ts";

const isRoot = process.geteuid?.() === 0;

describe.skipIf(!isRoot)("the WAL checkpointer on a full disk (tmpfs, as root)", () => {
  test("a run with no room is skipped and logged once; checkpoints run again after", async () => {
    using base = tempDir("o4s-walfull-");
    const mnt = join(base.path, "mnt");
    const unmount = mountTmpfs(mnt, "4m", 0o700);
    try {
      const path = join(mnt, "openai4s.db");
      const db = openDatabase(path);
      db.sqlite.run("CREATE TABLE probe (b BLOB)");
      const round = () =>
        db.sqlite.transaction(() => {
          for (let i = 0; i < 150; i++)
            db.sqlite.run("INSERT INTO probe VALUES (randomblob(3000))");
        })();
      const log = memoryLog();
      const c = startWalCheckpointer(db.sqlite, { path, log, intervalMs: 5, backstopPages: 1e6 });
      try {
        round();
        // Checkpointed whole: the next round reuses the WAL's space, the store must grow.
        await eventually(() => {
          const s = c.stats();
          return s.walFrames > 0 && s.copiedFrames === s.walFrames;
        });
        fillFilesystem(join(mnt, "filler"));
        round();
        const noRoom = () =>
          log.lines
            .map((l) => JSON.parse(l) as Record<string, unknown>)
            .filter((e) => String(e["message"]).includes("WAL checkpoint found no room"));
        await eventually(() => noRoom().length === 1, {
          what: "the run with no room logged",
          timeoutMs: 10_000,
        });
        expect(noRoom()[0]?.["path"]).toBe(path);
        expect(c.state().kind).toBe("Running");
        rmSync(join(mnt, "filler"));
        await eventually(() => log.lines.some((l) => l.includes("checkpoints run again")), {
          what: "checkpoints again once space returned",
        });
        expect(noRoom().length).toBe(1);
        expect(c.state().kind).toBe("Running");
      } finally {
        await c.stop();
        db.close();
      }
    } finally {
      unmount();
    }
  }, 30_000);
});
