/**
 * What the daemon trusts, tried through the compiled binary as admins run it (issue 8):
 * a state dir, or a file in it, that another user owns is refused at start; a plain BATCH
 * job (sessions off, the default `serve`) cannot read the private state by any path; and a
 * state dir of the old single-directory layout is migrated with a job still running.
 *
 * Ownership cases need root (chown to uid 65534); they are skipped, loudly, otherwise.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { stateLayout } from "../../src/core/layout.ts";
import { BINARY, ensureBuilt } from "../support/binary.ts";
import { eventually } from "../support/eventually.ts";
import { makeTempDir } from "../support/temp-dir.ts";

const NOBODY = 65534;
const isRoot = process.geteuid?.() === 0;
const bases: string[] = [];
const procs: Bun.Subprocess[] = [];

beforeAll(() => ensureBuilt(), 120_000);
afterAll(async () => {
  for (const proc of procs) {
    if (proc.exitCode === null) {
      proc.kill("SIGKILL");
      await proc.exited;
    }
  }
  for (const base of bases) rmSync(base, { recursive: true, force: true });
});

/** A temp dir holding `state` (and its default sibling spool `state-spool`). */
function base(): string {
  const dir = makeTempDir("o4s-trust-");
  bases.push(dir);
  return dir;
}

function env(home: string): Record<string, string> {
  return { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home, LANG: "C.UTF-8" };
}

/** Runs `serve` expecting it to refuse: exit code and stderr. */
async function serveRefused(stateDir: string): Promise<{ code: number; stderr: string }> {
  const proc = Bun.spawn([BINARY, "serve", "--state-dir", stateDir], {
    stdout: "pipe",
    stderr: "pipe",
    env: env(stateDir),
  });
  procs.push(proc);
  const code = await Promise.race([
    proc.exited,
    Bun.sleep(30_000).then(() => {
      proc.kill("SIGKILL");
      return -1;
    }),
  ]);
  return { code, stderr: await new Response(proc.stderr).text() };
}

async function api(
  socket: string,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://localhost${path}`, {
    unix: socket,
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function poll<T>(read: () => Promise<T> | T, done: (v: T) => boolean, ms: number) {
  let last = await read();
  const holds = async () => {
    last = await read();
    return done(last);
  };
  // The caller asserts on the last value read, which says more than a timeout would.
  await eventually(holds, { timeoutMs: ms, intervalMs: 100 }).catch(() => {});
  return last;
}

async function serve(stateDir: string): Promise<Bun.Subprocess> {
  const proc = Bun.spawn([BINARY, "serve", "--state-dir", stateDir], {
    stdout: "ignore",
    stderr: "pipe",
    env: env(stateDir),
  });
  procs.push(proc);
  const socket = join(stateDir, "api.sock");
  const up = await poll(
    async () => {
      if (proc.exitCode !== null) return "exited";
      try {
        return (await api(socket, "GET", "/healthz")).status === 200 ? "up" : "down";
      } catch {
        return "down";
      }
    },
    (s) => s !== "down",
    30_000,
  );
  if (up !== "up") {
    throw new Error(`daemon did not start: ${await new Response(proc.stderr).text()}`);
  }
  return proc;
}

async function terminal(socket: string, id: string): Promise<Record<string, unknown>> {
  return poll(
    async () => (await api(socket, "GET", `/v1/workloads/${id}`)).body,
    (w) => ["COMPLETED", "FAILED", "CANCELLED"].includes(String(w["phase"])),
    60_000,
  );
}

describe.skipIf(!isRoot)("the state dir is the daemon's alone (binary, as root)", () => {
  test.each([
    ["admin-token", "an admin token planted by another user"],
    ["openai4s.db", "a database planted by another user"],
  ])(
    "%s: %s is refused, exit 2 naming the path and owner",
    async (name) => {
      const state = join(base(), "state");
      mkdirSync(state, { mode: 0o700 });
      const planted = join(state, name);
      writeFileSync(planted, name === "admin-token" ? `${"A".repeat(43)}\n` : "", { mode: 0o600 });
      chownSync(planted, NOBODY, NOBODY);
      const { code, stderr } = await serveRefused(state);
      expect(code).toBe(2);
      expect(stderr).toContain(planted);
      expect(stderr).toContain(`uid ${NOBODY}`);
    },
    60_000,
  );

  test("a state dir owned by another user is refused", async () => {
    const state = join(base(), "state");
    mkdirSync(state, { mode: 0o700 });
    chownSync(state, NOBODY, NOBODY);
    const { code, stderr } = await serveRefused(state);
    expect(code).toBe(2);
    expect(stderr).toContain(state);
    expect(stderr).toContain(`uid ${NOBODY}`);
    expect(existsSync(join(state, "openai4s.db"))).toBe(false);
  }, 60_000);

  test("a state dir others may write is refused, not tightened", async () => {
    const state = join(base(), "state");
    mkdirSync(state);
    chmodSync(state, 0o777);
    const { code, stderr } = await serveRefused(state);
    expect(code).toBe(2);
    expect(stderr).toContain("writable by group or other");
    expect(existsSync(join(state, "admin-token"))).toBe(false);
  }, 60_000);

  test("a parent another user owns, or may write without the sticky bit, is refused", async () => {
    const owned = join(base(), "theirs");
    mkdirSync(owned, { mode: 0o755 });
    chownSync(owned, NOBODY, NOBODY);
    const inOwned = await serveRefused(join(owned, "state"));
    expect(inOwned.code).toBe(2);
    expect(inOwned.stderr).toContain(`${owned} (above the state dir`);
    expect(inOwned.stderr).toContain(`uid ${NOBODY}`);

    const open = join(base(), "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    const inOpen = await serveRefused(join(open, "state"));
    expect(inOpen.code).toBe(2);
    expect(inOpen.stderr).toContain(`${open} (above the state dir`);
  }, 60_000);

  test("a sticky world-writable parent (like /tmp) is fine when the state dir is ours", async () => {
    const sticky = join(base(), "sticky");
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777);
    const state = join(sticky, "state");
    const proc = await serve(state);
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  }, 60_000);
});

describe("private state is out of every job's reach (binary)", () => {
  test("a plain BATCH job with sessions off reads no db, key or token, by any path", async () => {
    const state = join(base(), "state");
    const proc = await serve(state);
    const socket = join(state, "api.sock");
    const token = readFileSync(join(state, "admin-token"), "utf8").trim();
    const script = [
      'for p in ../../../admin-token ../../../../state/admin-token "$S/admin-token" "$S/openai4s.db" "$S/signing-key" "/proc/$D/cwd/admin-token" "/proc/$D/root$S/admin-token" "/proc/$D/root$S/openai4s.db"; do',
      '  if cat "$p" >/dev/null 2>&1; then echo "READ $p"; cat "$p"; else echo "DENIED $p"; fi',
      "done",
      'ls -a ../../.. "$S" "/proc/$D/cwd" 2>&1 || true',
    ].join("\n");
    const created = await api(socket, "POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["sh", "-c", script],
      env: { S: state, D: String(proc.pid) },
    });
    expect(created.status).toBe(201);
    const id = String(created.body["id"]);
    const done = await terminal(socket, id);
    expect(done["phase"]).toBe("COMPLETED");
    const allocation = (done["allocations"] as { id: string }[])[0];
    if (allocation === undefined) throw new Error("no allocation");
    const layout = stateLayout(state);
    const out = readFileSync(layout.jobLogPath(id, allocation.id, "stdout"), "utf8");
    expect(out).toContain("DENIED ../../../admin-token");
    expect(out).not.toContain("READ ");
    expect(out).not.toContain(token);
    // Nor does any listing show the private files' names.
    const listings = out
      .split("\n")
      .filter((l) => !l.startsWith("DENIED "))
      .join("\n");
    expect(listings).not.toContain("openai4s.db");
    expect(listings).not.toContain("admin-token");
    // The job's cwd is in the spool, beside (never below) the private dir.
    expect(layout.workspaceDir(id).startsWith(`${state}/`)).toBe(false);
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  }, 120_000);
});

describe("a state dir of the old single-directory layout is migrated (binary)", () => {
  test("a running job, its workspace, logs, credentials and attempt record: nothing lost", async () => {
    const state = join(base(), "state");
    const layout = stateLayout(state);
    const socket = join(state, "api.sock");
    const first = await serve(state);
    // Runs across the migration: writes before, waits for the go, writes after.
    const created = await api(socket, "POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: [
        "sh",
        "-c",
        "echo before > note; echo logged-before; while [ ! -e go ]; do sleep 0.1; done; echo after >> note; echo logged-after",
      ],
    });
    expect(created.status).toBe(201);
    const id = String(created.body["id"]);
    await poll(
      () => existsSync(join(layout.workspaceDir(id), "note")),
      (v) => v,
      30_000,
    );
    first.kill("SIGKILL");
    await first.exited;

    // Turn it into the old layout: workloads inside the state dir, the attempt record in the
    // allocation dir, job records naming the old paths.
    const oldWorkloads = join(state, "workloads");
    renameSync(join(layout.spool, "workloads"), oldWorkloads);
    const allocations = join(oldWorkloads, id, "allocations");
    const [allocationId] = readdirSync(allocations);
    if (allocationId === undefined) throw new Error("no allocation dir");
    const oldAllocation = join(allocations, allocationId);
    mkdirSync(join(oldAllocation, "credentials"), { mode: 0o700 });
    writeFileSync(join(oldAllocation, "credentials", "rank-0.cred"), "cred", { mode: 0o600 });
    writeFileSync(join(oldAllocation, "session-attempt.json"), '{"ranks":1}\n');
    const jobs = join(layout.backendDir("local"), "jobs");
    for (const token of readdirSync(jobs)) {
      const path = join(jobs, token, "record.json");
      if (!existsSync(path)) continue;
      writeFileSync(path, readFileSync(path, "utf8").replaceAll(`${layout.spool}/`, `${state}/`));
    }

    await serve(state);
    expect(existsSync(oldWorkloads)).toBe(false);
    const workspace = layout.workspaceDir(id);
    expect(readFileSync(join(workspace, "note"), "utf8")).toBe("before\n");
    const newAllocation = layout.allocationDir(id, allocationId);
    expect(readFileSync(join(newAllocation, "credentials", "rank-0.cred"), "utf8")).toBe("cred");
    expect(
      readFileSync(join(layout.attemptRecordDir(id, allocationId), "session-attempt.json"), "utf8"),
    ).toBe('{"ranks":1}\n');
    expect(existsSync(join(newAllocation, "session-attempt.json"))).toBe(false);

    // The job, still running with its cwd moved under it, finishes into the new place.
    writeFileSync(join(workspace, "go"), "");
    const done = await terminal(socket, id);
    expect(done).toMatchObject({ phase: "COMPLETED", exitCode: 0 });
    expect(readFileSync(join(workspace, "note"), "utf8")).toBe("before\nafter\n");
    expect(readFileSync(layout.jobLogPath(id, allocationId, "stdout"), "utf8")).toBe(
      "logged-before\nlogged-after\n",
    );
  }, 180_000);
});
