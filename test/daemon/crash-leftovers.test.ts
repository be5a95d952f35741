/**
 * Issue 33: a restore killed at any step leaves a whole store at the store's path, and what
 * it left (the staged copy and its journal) is gone after the next start. The old restore
 * renamed the store aside before moving the copy in (killed between the two: no store at
 * all) and left `openai4s.db.restoring` and its journal for good.
 *
 * Each case is a real SIGKILL: a child process runs the restore's swap and kills itself at
 * one step; the current store's newest commit sits in its WAL, as a daemon killed -9 leaves it.
 */

import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  createWorkload,
  getWorkload,
  openDatabase,
} from "../../src/adapters/store-sqlite/index.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { main } from "../../src/main.ts";
import { BUN, ROOT } from "../support/binary.ts";
import { captureIo } from "../support/cli-runtime.ts";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-restore-kill-", "each");

function addWorkload(path: string, id: string): void {
  const opened = openDatabase(path);
  createWorkload({ db: opened.db, clock: manualClock() }, {
    kind: "BATCH",
    profile: "default",
    spec: { command: ["true"] },
    id,
    name: id,
    maxAttempts: 1,
    idempotencyKey: null,
    requestHash: id,
  } as never);
  opened.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
  opened.sqlite.run("PRAGMA journal_mode = DELETE");
  opened.close();
}

async function runChild(script: string, args: readonly string[]): Promise<number | null> {
  const p = Bun.spawn([BUN, "-e", script, ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const code = await p.exited;
  if (p.signalCode !== "SIGKILL") {
    throw new Error(`child was not killed (${code}): ${await new Response(p.stderr).text()}`);
  }
  return code;
}

/** The current store: w-old committed and still only in the WAL (a daemon killed -9). */
const KILLED_WRITER = `
import { createWorkload, openDatabase } from "./src/adapters/store-sqlite/index.ts";
import { manualClock } from "./src/lib/clock.ts";
const opened = openDatabase(process.argv[1]);
createWorkload({ db: opened.db, clock: manualClock() }, { kind: "BATCH", profile: "default",
  spec: { command: ["true"] }, id: "w-old", name: "w-old", maxAttempts: 1,
  idempotencyKey: null, requestHash: "w-old" });
process.kill(process.pid, "SIGKILL");
`;

/** The restore's swap, killed at the step named; at `copied`, mid-adjustment (a WAL open). */
const KILLED_RESTORE = `
import { Database } from "bun:sqlite";
import { swapIn } from "./src/apps/daemon/restore-command.ts";
const [copy, state, at] = process.argv.slice(1);
swapIn(copy, state, false, (step) => {
  if (step !== at) return;
  if (step === "copied") {
    const db = new Database(state + "/openai4s.db.restoring");
    db.run("PRAGMA journal_mode = WAL");
    db.run("CREATE TABLE half_adjusted (x)");
  }
  process.kill(process.pid, "SIGKILL");
});
`;

function storeAt(state: string): { integrity: string; ids: string[] } {
  const path = join(state, "openai4s.db");
  expect(existsSync(path)).toBe(true);
  const db = new Database(path);
  try {
    const integrity = String(Object.values(db.query("PRAGMA integrity_check").get() as object)[0]);
    const ids = (db.query("SELECT id FROM workloads ORDER BY id").all() as { id: string }[]).map(
      (r) => r.id,
    );
    return { integrity, ids };
  } finally {
    db.close();
  }
}

const leftovers = (state: string) =>
  readdirSync(state).filter((n) => n.startsWith("openai4s.db.restoring"));

describe("restore killed at each step", () => {
  for (const step of ["copied", "staged", "folded", "kept", "swapped"] as const) {
    test(`killed after ${step}: a whole store at the path, leftovers swept at the next start`, async () => {
      const dir = tempDir();
      const copy = join(dir, "copy.db");
      addWorkload(copy, "w-copy");
      const state = join(dir, "state");
      mkdirSync(state, { mode: 0o700 });
      addWorkload(join(state, "openai4s.db"), "w-first");
      await runChild(KILLED_WRITER, [join(state, "openai4s.db")]);
      expect(existsSync(join(state, "openai4s.db-wal"))).toBe(true);

      await runChild(KILLED_RESTORE, [copy, state, step]);
      const after = storeAt(state);
      expect(after.integrity).toBe("ok");
      // Before the swap the old store (with its WAL's commit), after it the copy.
      expect(after.ids).toEqual(step === "swapped" ? ["w-copy"] : ["w-first", "w-old"]);
      if (step === "copied") expect(leftovers(state).length).toBeGreaterThan(1);

      const daemon = await startedDaemon(localDaemonConfig(state));
      await daemon.stop();
      expect(leftovers(state)).toEqual([]);
      expect(storeAt(state).integrity).toBe("ok");

      // And a restore run again completes.
      const io = captureIo({});
      expect(await main("openai4s", ["restore", copy, "--state-dir", state], io)).toBe(0);
      const opened = openDatabase(join(state, "openai4s.db"));
      expect(getWorkload({ db: opened.db, clock: manualClock() }, "w-copy")).not.toBeNull();
      opened.close();
      expect(leftovers(state)).toEqual([]);
    }, 30_000);
  }
});

describe("uploads killed mid-way", () => {
  test("the next start empties the spool's staging directory, and leaves workspaces alone", async () => {
    const dir = tempDir();
    const state = join(dir, "state");
    const first = await startedDaemon(localDaemonConfig(state));
    const spool = first.layout.spool;
    await first.stop();
    mkdirSync(join(spool, ".uploads"), { mode: 0o700 });
    writeFileSync(join(spool, ".uploads", "upload-left-by-a-kill"), "half an upload");
    mkdirSync(join(spool, "workloads", "w-x", "workspace"), { recursive: true });
    writeFileSync(join(spool, "workloads", "w-x", "workspace", "upload-mine"), "the user's");
    const again = await startedDaemon(localDaemonConfig(state));
    await again.stop();
    expect(readdirSync(join(spool, ".uploads"))).toEqual([]);
    expect(readdirSync(join(spool, "workloads", "w-x", "workspace"))).toEqual(["upload-mine"]);
  }, 30_000);
});
