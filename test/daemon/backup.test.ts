/**
 * `openai4s backup DEST` against a real daemon (local backend, real jobs): a copy taken
 * while workloads are being submitted passes sqlite3's own integrity_check, a backup never
 * overwrites, and a daemon started on a restored copy converges without starting any job a
 * second time.
 */

import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type RunningDaemon, startDaemon } from "../../src/apps/daemon/daemon.ts";
import { storeBackup } from "../../src/apps/daemon/store-backup.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { main } from "../../src/main.ts";
import { captureIo } from "../support/cli-runtime.ts";
import { localDaemonConfig } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { socketApi, waitForPhase } from "../support/socket-api.ts";
import { tempDirs } from "../support/temp-dir.ts";

const daemons: RunningDaemon[] = [];
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
});
// After the daemons' hook: hooks run in order, and a daemon still running writes into its dir.
const root = tempDirs("o4s-backup-", "each");

async function start(stateDir: string): Promise<RunningDaemon> {
  const result = await startDaemon(localDaemonConfig(stateDir));
  if (result.kind !== "Started") throw new Error(`did not start: ${JSON.stringify(result)}`);
  daemons.push(result.daemon);
  return result.daemon;
}

const api = (socket: string, method: string, path: string, body?: unknown) =>
  socketApi(socket)(method, path, body);

const waitPhase = (socket: string, id: string, phases: readonly string[]) =>
  waitForPhase(socketApi(socket), id, phases, 60_000, 100);

async function backup(socket: string, dest: string) {
  const io = captureIo({ OPENAI4S_SERVER: `unix:${socket}` });
  const code = await main("openai4s", ["backup", dest], io);
  return { code, out: io.out(), err: io.err() };
}

function sqlite3(path: string, sql: string): string {
  const run = Bun.spawnSync(["sqlite3", path, sql], { stdout: "pipe", stderr: "pipe" });
  if (run.exitCode !== 0) throw new Error(`sqlite3: ${run.stderr.toString()}`);
  return run.stdout.toString().trim();
}

describe("backup temporaries", () => {
  test("the copy is born 0600, whatever the umask", () => {
    const dir = root();
    const sqlite = new Database(join(dir, "store.db"));
    sqlite.run("CREATE TABLE t (x)");
    const previous = process.umask(0o022);
    try {
      const path = storeBackup(sqlite, stateLayout(dir)).snapshot();
      expect(statSync(path).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(previous);
      sqlite.close();
    }
  });

  test("a copy that fails leaves nothing behind", () => {
    const dir = root();
    const sqlite = new Database(join(dir, "store.db"));
    sqlite.close();
    expect(() => storeBackup(sqlite, stateLayout(dir)).snapshot()).toThrow();
    expect(readdirSync(dir).filter((n) => n.startsWith(".backup-"))).toEqual([]);
  });

  test("copies left by a daemon killed mid-backup are swept at start; nothing else is", async () => {
    const dir = root();
    const stateDir = join(dir, "state");
    await (await start(stateDir)).stop();
    daemons.splice(0);
    const leftover = `.backup-${randomUUID()}.db`;
    writeFileSync(join(stateDir, leftover), "a whole copy of the store", { mode: 0o600 });
    writeFileSync(join(stateDir, `${leftover}-journal`), "", { mode: 0o600 });
    writeFileSync(join(stateDir, ".backup-notes.db"), "not ours", { mode: 0o600 });
    await start(stateDir);
    const names = readdirSync(stateDir);
    expect(names).not.toContain(leftover);
    expect(names).not.toContain(`${leftover}-journal`);
    expect(names).toContain(".backup-notes.db");
  });
});

describe("openai4s backup", () => {
  test("copies taken under load pass integrity_check; names what to keep; never overwrites", async () => {
    const dir = root();
    const daemon = await start(join(dir, "state"));
    const socket = daemon.layout.apiSocket;
    // Load: submissions in flight the whole time the copies are taken (bounded).
    let stop = false;
    let accepted = 0;
    const load = (async () => {
      for (let i = 0; i < 400 && !stop; i++) {
        const batch = await Promise.all(
          Array.from({ length: 4 }, () =>
            api(socket, "POST", "/v1/workloads", {
              kind: "BATCH",
              profile: "default",
              command: ["true"],
            }),
          ),
        );
        accepted += batch.filter((r) => r.status === 201).length;
      }
    })();
    const copies: string[] = [];
    for (let i = 0; i < 3; i++) {
      await eventually(() => accepted >= (i + 1) * 20, { intervalMs: 20 });
      const dest = join(dir, `copy-${i}.db`);
      const result = await backup(socket, dest);
      expect(result.code).toBe(0);
      expect(result.out).toContain("integrity_check ok");
      // No worker gateway here, so no signing key: only files that exist are named.
      expect(result.out).not.toContain("signing-key");
      // The admin token under the secrets; the audit log with the copy, not a secret.
      const [kept, secrets] = result.out.split("Secrets:") as [string, string];
      expect(secrets).toMatch(new RegExp(`admin-token +${daemon.layout.adminToken}`));
      expect(kept).toMatch(new RegExp(`audit\\.log +${daemon.layout.auditLog}`));
      copies.push(dest);
    }
    stop = true;
    await load;
    for (const [i, copy] of copies.entries()) {
      expect(sqlite3(copy, "PRAGMA integrity_check")).toBe("ok");
      // A self-contained file: no WAL to forget beside it.
      expect(sqlite3(copy, "PRAGMA journal_mode")).toBe("delete");
      expect(Number(sqlite3(copy, "SELECT count(*) FROM workloads"))).toBeGreaterThanOrEqual(
        (i + 1) * 20,
      );
    }
    // Nothing is left behind in the state dir.
    const leftovers = new Bun.Glob(".backup-*").scanSync({ cwd: daemon.layout.root, dot: true });
    expect([...leftovers]).toEqual([]);

    const before = readFileSync(copies[0] as string);
    const again = await backup(socket, copies[0] as string);
    expect(again.code).toBe(2);
    expect(again.err).toContain("exists; a backup never overwrites");
    expect(readFileSync(copies[0] as string).equals(before)).toBe(true);
  }, 120_000);

  test("a daemon started on a restored copy converges without running a job twice", async () => {
    const dir = root();
    const stateDir = join(dir, "state");
    const first = await start(stateDir);
    const socket = first.layout.apiSocket;
    // The job records each start and waits for the test, so it is provably RUNNING when
    // the copy is taken and ends only after. Both files are in its workspace (its working
    // directory), all of this machine a sandboxed job running as another uid can see.
    const created = await api(socket, "POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      maxAttempts: 3,
      command: [
        "sh",
        "-c",
        'echo "$OPENAI4S_ALLOCATION_ID" >> starts; while [ ! -e gate ]; do sleep 0.1; done',
      ],
    });
    const id = String(created.body["id"]);
    const marks = join(first.layout.workspaceDir(id), "starts");
    const gate = join(first.layout.workspaceDir(id), "gate");
    await waitPhase(socket, id, ["RUNNING"]);
    const copy = join(dir, "copy.db");
    expect((await backup(socket, copy)).code).toBe(0);
    // After the copy: the job ends, and another workload is created and run.
    writeFileSync(gate, "");
    await waitPhase(socket, id, ["COMPLETED"]);
    const later = await api(socket, "POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["true"],
    });
    await waitPhase(socket, String(later.body["id"]), ["COMPLETED"]);
    const busy = captureIo({});
    expect(await main("openai4s", ["restore", copy, "--state-dir", stateDir], busy)).toBe(1);
    expect(busy.err()).toContain("stop the daemon first");
    await first.stop();
    daemons.splice(daemons.indexOf(first), 1);

    // Restore as docs/operations.md says: the daemon stopped, `openai4s restore`; keys and
    // job records stay in the state dir.
    const io = captureIo({});
    expect(await main("openai4s", ["restore", copy, "--state-dir", stateDir], io)).toBe(0);
    expect(io.out()).toContain("attempts live in the copy: 1 (");
    const second = await start(stateDir);
    const restored = await waitPhase(second.layout.apiSocket, id, [
      "COMPLETED",
      "FAILED",
      "LOST",
      "CANCELLED",
    ]);
    // The local backend forgets a job once its end was acknowledged, so the restored daemon
    // may find it gone (LOST); what must not happen is a second run.
    expect(["COMPLETED", "LOST"]).toContain(String(restored["phase"]));
    expect((restored["allocations"] as unknown[]).length).toBe(1);
    // The job started once: the restored daemon observed it, it did not submit it again.
    const starts = readFileSync(marks, "utf8").trim().split("\n");
    expect(starts.length).toBe(1);
    // What happened after the copy is not in it: documented, not silently invented.
    const gone = await api(second.layout.apiSocket, "GET", `/v1/workloads/${later.body["id"]}`);
    expect(gone.status).toBe(404);
    expect(existsSync(gate)).toBe(true);
  }, 120_000);
});
