/**
 * Issue 33: a restore onto a fresh state dir made a new owner id, so a cluster job submitted
 * after the backup ran on while the orphan check reported nothing; and the summary said
 * "live attempts: 0" while one ran (an attempt on its last try had no retry to take away).
 * The backup now carries the backends' owner ids inside the copy and the restore puts them
 * back; the summary counts every live attempt.
 */
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  applyTransition,
  createWorkload,
  mintAttempt,
  openDatabase,
} from "../../src/adapters/store-sqlite/index.ts";
import { CARRIED_TABLE } from "../../src/apps/daemon/backup-carried.ts";
import { storeBackup } from "../../src/apps/daemon/store-backup.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { externalHandle, mintSubmissionToken } from "../../src/core/models.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { main } from "../../src/main.ts";
import { captureIo } from "../support/cli-runtime.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-restore-fresh-", "each");
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
const OWNER = "abcdefghijkl\n";

/** State dir A: one RUNNING workload on its only attempt, and a cluster owner id. */
function stateWithLiveLastAttempt(dir: string): string {
  const state = join(dir, "a");
  mkdirSync(join(state, "backends", "slurm"), { recursive: true, mode: 0o700 });
  writeFileSync(join(state, "backends", "slurm", "owner-id"), OWNER, { mode: 0o600 });
  const opened = openDatabase(join(state, "openai4s.db"));
  const store = { db: opened.db, clock: manualClock() };
  createWorkload(store, {
    kind: "BATCH",
    profile: "default",
    spec: { command: ["true"] },
    id: "w-live",
    name: "w-live",
    maxAttempts: 1,
    idempotencyKey: null,
    requestHash: "w-live",
  } as never);
  mintAttempt(store, {
    workloadId: "w-live",
    allocationId: "a-live",
    token: mintSubmissionToken(random),
    expectedEpoch: 0,
    message: "submitting",
  });
  applyTransition(store, {
    allocation: {
      id: "a-live",
      expectedPhase: "SUBMITTING",
      phase: "RUNNING",
      reason: "STARTED",
      message: "started",
      handle: externalHandle("1"),
    },
    workload: {
      id: "w-live",
      expectedPhase: "SUBMITTING",
      expectedEpoch: 1,
      phase: "RUNNING",
      reason: "STARTED",
      message: "started",
    },
  });
  const copy = join(dir, "copy.db");
  const snapshot = storeBackup(opened.sqlite, stateLayout(state)).snapshot();
  opened.close();
  writeFileSync(copy, readFileSync(snapshot));
  return copy;
}

async function restore(copy: string, state: string) {
  const io = captureIo({});
  const code = await main("openai4s", ["restore", copy, "--state-dir", state], io);
  return { code, out: io.out(), err: io.err() };
}

describe("restore onto a fresh state dir", () => {
  test("the owner id comes back from the copy; a live attempt on its last try is counted", async () => {
    const dir = tempDir();
    const copy = stateWithLiveLastAttempt(dir);
    const fresh = join(dir, "b");
    const result = await restore(copy, fresh);
    expect(result.code).toBe(0);
    expect(result.out).toContain("attempts live in the copy: 1");
    expect(result.out).toContain("backends/slurm/owner-id put back from the copy");
    // The cluster's jobs are not what "no running local job is unknown" checked: it says so.
    expect(result.out).toContain("jobs of the slurm backend are not checked here");
    expect(result.out).toContain("backend.orphans");
    const ownerFile = join(fresh, "backends", "slurm", "owner-id");
    expect(readFileSync(ownerFile, "utf8")).toBe(OWNER);
    expect(statSync(ownerFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(fresh, "backends")).mode & 0o777).toBe(0o700);
    // The carrier table does not stay in the store the daemon opens.
    const db = new Database(join(fresh, "openai4s.db"), { readonly: true });
    expect(db.query("SELECT name FROM sqlite_master WHERE name = ?").get(CARRIED_TABLE)).toBeNull();
    db.close();
  });

  test("a state dir with another owner id gets the copy's, its own kept aside", async () => {
    const dir = tempDir();
    const copy = stateWithLiveLastAttempt(dir);
    const other = join(dir, "c");
    mkdirSync(join(other, "backends", "slurm"), { recursive: true, mode: 0o700 });
    writeFileSync(join(other, "backends", "slurm", "owner-id"), "zzzzzzzzzzzz\n", { mode: 0o600 });
    const result = await restore(copy, other);
    expect(result.code).toBe(0);
    expect(readFileSync(join(other, "backends", "slurm", "owner-id"), "utf8")).toBe(OWNER);
    expect(result.out).toMatch(/differed: kept as backends\/slurm\/owner-id\.before-restore-/);
  });

  test("a path in the copy outside backends/NAME/owner-id is never written", async () => {
    const dir = tempDir();
    const copy = stateWithLiveLastAttempt(dir);
    const db = new Database(copy);
    db.run(`INSERT INTO ${CARRIED_TABLE} (path, content) VALUES ('admin-token', 'planted')`);
    db.run(
      `INSERT INTO ${CARRIED_TABLE} (path, content) VALUES ('backends/../../x/owner-id', 'p')`,
    );
    db.close();
    const fresh = join(dir, "d");
    expect((await restore(copy, fresh)).code).toBe(0);
    expect(existsSync(join(fresh, "admin-token"))).toBe(false);
    expect(existsSync(join(dir, "x"))).toBe(false);
  });
});
