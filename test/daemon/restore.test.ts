/**
 * `openai4s restore` on a copy built with the store's own operations: in-flight attempts
 * lose their automatic retries, waiting workloads are listed, and with --cancel-pending
 * they are asked to stop; the current store is kept aside, never deleted.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  applyTransition,
  createWorkload,
  getWorkload,
  mintAttempt,
  openDatabase,
} from "../../src/adapters/store-sqlite/index.ts";
import { externalHandle, mintSubmissionToken } from "../../src/core/models.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { main } from "../../src/main.ts";
import { BINARY, ensureBuilt } from "../support/binary.ts";
import { captureIo } from "../support/cli-runtime.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-restore-", "each");

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

/** A copy with one RUNNING workload (3 attempts allowed) and one PENDING. */
function copyWithLiveAndWaiting(path: string): void {
  const opened = openDatabase(path);
  const store = { db: opened.db, clock: manualClock() };
  const base = { kind: "BATCH", profile: "default", spec: { command: ["true"] } } as const;
  for (const id of ["w-live", "w-waiting"]) {
    createWorkload(store, {
      ...base,
      id,
      name: id,
      maxAttempts: 3,
      idempotencyKey: null,
      requestHash: id,
    } as never);
  }
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
  // A backup is one file: everything in the main database, nothing left in a WAL.
  opened.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
  opened.sqlite.run("PRAGMA journal_mode = DELETE");
  opened.close();
}

describe("openai4s restore", () => {
  test("no retry for live attempts; waiting workloads listed and, asked, cancelled", async () => {
    const dir = tempDir();
    const copy = join(dir, "copy.db");
    copyWithLiveAndWaiting(copy);
    const state = join(dir, "state");
    mkdirSync(state, { mode: 0o700 });
    const current = openDatabase(join(state, "openai4s.db"));
    current.close();

    const io = captureIo({});
    expect(
      await main("openai4s", ["restore", copy, "--state-dir", state, "--cancel-pending"], io),
    ).toBe(0);
    expect(io.out()).toContain(
      "attempts live in the copy: 1 (observed as usual, none retried automatically; 1 had retries left)",
    );
    expect(io.out()).toContain("1 workload(s) were waiting to be submitted and are cancelled");
    expect(io.out()).toContain("  w-waiting");
    expect(readdirSync(state).some((f) => f.startsWith("openai4s.db.before-restore-"))).toBe(true);
    expect(existsSync(join(state, "openai4s.db.restoring"))).toBe(false);

    const restored = openDatabase(join(state, "openai4s.db"));
    const store = { db: restored.db, clock: manualClock() };
    expect(getWorkload(store, "w-live")?.maxAttempts).toBe(1);
    expect(getWorkload(store, "w-waiting")?.desired.kind).toBe("STOP");
    restored.close();
  });

  test("a copy that is not a database is refused and nothing is replaced", async () => {
    const dir = tempDir();
    const bogus = join(dir, "bogus.db");
    await Bun.write(bogus, "not a database at all, just text that is long enough".repeat(100));
    const state = join(dir, "state");
    const io = captureIo({});
    expect(await main("openai4s", ["restore", bogus, "--state-dir", state], io)).toBe(1);
    expect(existsSync(join(state, "openai4s.db"))).toBe(false);
  });

  const SERVICE_UID = 65534; // nobody: the daemon's account in these tests

  /** A state dir owned by the service account, reachable by it, and a root-owned copy. */
  function serviceAccountLayout(): { dir: string; state: string; copy: string } {
    const dir = tempDir();
    chmodSync(dir, 0o755);
    const copy = join(dir, "copy.db");
    copyWithLiveAndWaiting(copy);
    chmodSync(copy, 0o600);
    const state = join(dir, "state");
    mkdirSync(state, { mode: 0o700 });
    chownSync(state, SERVICE_UID, SERVICE_UID);
    return { dir, state, copy };
  }

  async function restoreAs(uid: number, args: readonly string[], home: string) {
    const p = Bun.spawn(
      ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "--", BINARY, ...args],
      {
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home },
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ]);
    return { out, err, code };
  }

  test.skipIf(process.getuid?.() !== 0)(
    "run as root for a service account's state dir: the restored store is that account's, 0600",
    async () => {
      const { state, copy } = serviceAccountLayout();
      const io = captureIo({});
      expect(await main("openai4s", ["restore", copy, "--state-dir", state], io)).toBe(0);
      const db = statSync(join(state, "openai4s.db"));
      expect({ uid: db.uid, gid: db.gid, mode: db.mode & 0o777 }).toEqual({
        uid: SERVICE_UID,
        gid: SERVICE_UID,
        mode: 0o600,
      });
    },
  );

  test.skipIf(process.getuid?.() !== 0)(
    "run as the service account: a backup it cannot read says permission denied; one it can read is restored",
    async () => {
      ensureBuilt();
      const { dir, state, copy } = serviceAccountLayout();
      const denied = await restoreAs(SERVICE_UID, ["restore", copy, "--state-dir", state], dir);
      expect(denied.code).toBe(1);
      expect(denied.err).toContain("permission denied");
      expect(denied.err).not.toContain("integrity_check");
      expect(existsSync(join(state, "openai4s.db"))).toBe(false);

      chmodSync(copy, 0o644);
      const done = await restoreAs(SERVICE_UID, ["restore", copy, "--state-dir", state], dir);
      expect(done.err).toBe("");
      expect(done.code).toBe(0);
      const db = statSync(join(state, "openai4s.db"));
      expect({ uid: db.uid, mode: db.mode & 0o777 }).toEqual({ uid: SERVICE_UID, mode: 0o600 });
    },
    120_000,
  );
});
