/**
 * Sessions end to end, through the built binary, on the local backend with bubblewrap:
 * `session start` → READY, exec keeps state, a held-back worker is what READY names,
 * idle sessions are reclaimed with IDLE_TIMEOUT, cancel tears down through the barrier and
 * the worker exits; and without isolation a SESSION is refused with nothing written.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  condition,
  type Daemon,
  ensureBuilt,
  holdingWorker,
  ms,
  processesMentioning,
  refusalFootprint,
  startDaemon,
  type WorkloadView,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const E2E_TIMEOUT_MS = 60_000;

beforeAll(() => {
  ensureBuilt();
}, 120_000);

async function startSession(d: Daemon, ...extra: string[]): Promise<string> {
  const r = await d.cli("session", "start", ...extra);
  if (r.code !== 0) throw new Error(`session start failed (${r.code}): ${r.stderr}\n${d.log()}`);
  const id = r.stdout.trim().split(/\s+/).at(-1);
  if (!id) throw new Error(`no id in ${JSON.stringify(r.stdout)}`);
  return id;
}

async function waitReady(d: Daemon, id: string): Promise<WorkloadView> {
  const r = await d.cli("wait", id, "--until", "READY", "--timeout", "30s");
  if (r.code !== 0) {
    throw new Error(
      `wait READY failed (${r.code}): ${r.stdout}${r.stderr}\n${JSON.stringify(await d.show(id), null, 2)}\n${d.log()}`,
    );
  }
  return d.show(id);
}

async function exec(
  d: Daemon,
  id: string,
  code: string,
): Promise<{ status: string; output: string; error: string | null }> {
  const r = await d.cli("exec", id, code, "--json");
  // Exit 1 with a body is the code's own ERROR; anything else is the command failing.
  if (r.code !== 0 && !(r.code === 1 && r.stdout.includes('"status"'))) {
    throw new Error(`exec failed (${r.code}): ${r.stdout}${r.stderr}`);
  }
  return JSON.parse(r.stdout);
}

/** The worker processes of one workload: the sandbox and the worker inside it. */
function workersOf(d: Daemon, workloadId: string): number[] {
  return processesMentioning(join(`${d.stateDir}-spool`, "workloads", workloadId, "allocations"));
}

describe("sessions on the local backend with bubblewrap", () => {
  let d: Daemon;
  let holder: ReturnType<typeof holdingWorker>;
  let holderDir: string;
  const sessions: string[] = [];

  beforeAll(async () => {
    holderDir = makeTempDir("o4s-e2e-holder-");
    holder = holdingWorker(holderDir);
    d = await startDaemon({ env: { OPENAI4S_WORKER_COMMAND: JSON.stringify([holder.command]) } });
  }, 30_000);

  afterAll(async () => {
    holder?.release();
    for (const id of sessions) await d?.cli("cancel", id);
    for (const id of sessions) await d?.cli("wait", id, "--until", "TERMINAL", "--timeout", "20s");
    await d?.stop();
    if (holderDir) removeDir(holderDir);
  }, 60_000);

  test(
    "session start → READY, with all four conditions TRUE",
    async () => {
      const id = await startSession(d);
      sessions.push(id);
      const w = await waitReady(d, id);
      expect(w.kind).toBe("SESSION");
      expect(w.phase).toBe("RUNNING");
      for (const type of [
        "ALLOCATION_RUNNING",
        "WORKER_CONNECTED",
        "WORKSPACE_VISIBLE",
        "KERNEL_RESPONSIVE",
        "READY",
      ]) {
        expect(condition(w, type)?.status).toBe("TRUE");
      }
      expect(condition(w, "KERNEL_RESPONSIVE")?.message).toContain("1+1 evaluated to 2");
      // The worker runs in its own PID namespace: bwrap is on its command line.
      const pids = workersOf(d, id);
      expect(pids.length).toBeGreaterThan(0);
      const cmdlines = pids.map((p) => Bun.file(`/proc/${p}/cmdline`).text());
      expect((await Promise.all(cmdlines)).some((c) => c.includes("bwrap"))).toBe(true);
    },
    E2E_TIMEOUT_MS,
  );

  test(
    "runway on the local backend: the kernel's time_remaining() and TIME_REMAINING agree",
    async () => {
      const id = await startSession(d, "--time-limit", "10m");
      sessions.push(id);
      await waitReady(d, id);
      const view = (await d.show(id)) as WorkloadView & {
        readonly deadline: string | null;
        readonly timeRemainingSeconds: number | null;
      };
      const left = await exec(d, id, "int(time_remaining())");
      expect(left.status).toBe("OK");
      const kernelSeconds = Number(left.output);
      // The same deadline on both sides: the job's OPENAI4S_DEADLINE (whole seconds) and the
      // supervisor's start + limit the daemon reports. Read a moment apart, so a few seconds.
      expect(view.deadline).not.toBeNull();
      expect(view.timeRemainingSeconds).not.toBeNull();
      expect(kernelSeconds).toBeGreaterThan(0);
      expect(kernelSeconds).toBeLessThanOrEqual(600);
      expect(Math.abs(kernelSeconds - (view.timeRemainingSeconds as number))).toBeLessThan(15);
      const deadlineS = Math.floor(ms(view.deadline) / 1000);
      const told = await exec(d, id, "import os; int(os.environ['OPENAI4S_DEADLINE'])");
      expect(Number(told.output)).toBe(deadlineS);
    },
    E2E_TIMEOUT_MS,
  );

  test(
    "exec keeps state between calls and counts as activity",
    async () => {
      const id = sessions[0] ?? (await startSession(d));
      await waitReady(d, id);
      const before = ms((await d.show(id)).lastActiveAt);
      expect(await exec(d, id, "x = 41")).toMatchObject({ status: "OK", error: null });
      expect(await exec(d, id, "print('hello'); x + 1")).toMatchObject({
        status: "OK",
        output: "hello\n42",
        error: null,
        kernelRestarted: false,
      });
      const failed = await exec(d, id, "1/0");
      expect(failed.status).toBe("ERROR");
      expect(failed.error).toContain("ZeroDivisionError");
      expect(ms((await d.show(id)).lastActiveAt)).toBeGreaterThan(before);
      // The workspace is the kernel's working directory, and nothing else of the state is.
      const probe = await exec(
        d,
        id,
        `import os; (os.getcwd(), os.path.exists(${JSON.stringify(join(d.stateDir, "openai4s.db"))}))`,
      );
      expect(probe.output).toBe(
        `(${JSON.stringify(join(`${d.stateDir}-spool`, "workloads", id, "workspace")).replaceAll('"', "'")}, False)`,
      );
    },
    E2E_TIMEOUT_MS,
  );

  test(
    "a held-back worker: READY names WORKER_CONNECTED while the allocation runs",
    async () => {
      holder.hold();
      const id = await startSession(d);
      sessions.push(id);
      const held = await eventually(
        async () => {
          const w = await d.show(id);
          return condition(w, "ALLOCATION_RUNNING")?.status === "TRUE" ? w : null;
        },
        { what: "allocation RUNNING with the worker held back" },
      );
      expect(condition(held, "WORKER_CONNECTED")).toMatchObject({
        status: "FALSE",
        reason: "WORKER_MISSING",
      });
      expect(condition(held, "READY")).toMatchObject({
        status: "FALSE",
        reason: "WORKER_CONNECTED",
      });
      const notReady = await d.cli("exec", id, "1+1");
      expect(notReady.code).toBe(1);
      expect(notReady.stderr + notReady.stdout).toContain("WORKER_CONNECTED");
      holder.release();
      const w = await waitReady(d, id);
      expect(condition(w, "READY")?.status).toBe("TRUE");
    },
    E2E_TIMEOUT_MS,
  );

  test(
    "cancel tears down through the barrier and the worker exits",
    async () => {
      const id = await startSession(d);
      await waitReady(d, id);
      expect(workersOf(d, id).length).toBeGreaterThan(0);
      const r = await d.cli("cancel", id);
      expect(r.code).toBe(0);
      const done = await d.cli("wait", id, "--until", "TERMINAL", "--timeout", "30s");
      expect(done.code).not.toBe(2);
      const w = await d.show(id);
      expect(w.phase).toBe("CANCELLED");
      expect(w.reason).toBe("USER_CANCELLED");
      expect(condition(w, "READY")?.status).toBe("FALSE");
      await eventually(async () => workersOf(d, id).length === 0, {
        what: "the worker processes to exit",
        timeoutMs: 15_000,
      });
      // The stopped attempt's credential no longer opens the gateway (fenced).
      const again = await d.cli("exec", id, "1+1");
      expect(again.code).toBe(1);
    },
    E2E_TIMEOUT_MS,
  );
});

describe("idle sessions are reclaimed", () => {
  let d: Daemon;
  beforeAll(async () => {
    d = await startDaemon({ env: { OPENAI4S_SESSION_IDLE_TIMEOUT_SECONDS: "3" } });
  }, 30_000);
  afterAll(async () => {
    await d?.stop();
  }, 30_000);

  test(
    "with IDLE_TIMEOUT, through the barrier, and the message says to start a new one",
    async () => {
      const id = await startSession(d);
      await waitReady(d, id);
      const started = Date.now();
      const r = await d.cli("wait", id, "--until", "TERMINAL", "--timeout", "30s");
      expect(r.code).toBe(143); // ended, but not by completing: wait's code for CANCELLED
      const w = await d.show(id);
      expect(w.phase).toBe("CANCELLED");
      expect(w.reason).toBe("IDLE_TIMEOUT");
      expect(w.message ?? "").toContain("start a new session when you are back");
      expect(Date.now() - started).toBeLessThan(15_000);
      await eventually(async () => workersOf(d, id).length === 0, {
        what: "the worker processes to exit",
        timeoutMs: 15_000,
      });
    },
    E2E_TIMEOUT_MS,
  );
});

describe("without isolation", () => {
  test(
    "a SESSION is refused with ISOLATION_UNAVAILABLE and nothing is written",
    async () => {
      const d = await startDaemon({ env: { OPENAI4S_BWRAP: "/nonexistent/bwrap" } });
      try {
        // Rows, workload dirs and records: what a request writes. Not the database's bytes,
        // which the WAL checkpoint thread rewrites with no request at all.
        const db = join(d.stateDir, "openai4s.db");
        expect(existsSync(db)).toBe(true);
        const before = refusalFootprint(d);
        const r = await d.cli("session", "start", "--json");
        expect(r.code).toBe(1);
        expect(r.stdout + r.stderr).toContain("ISOLATION_UNAVAILABLE");
        expect(r.stdout + r.stderr).toContain("bwrap");
        expect(refusalFootprint(d)).toEqual(before);
        const list = await d.cli("list", "--json");
        expect(JSON.parse(list.stdout).items).toEqual([]);
        // BATCH still runs (unsandboxed, as documented).
        const batch = await d.cli("submit", "--", "/bin/sh", "-c", "exit 0");
        expect(batch.code).toBe(0);
      } finally {
        await d.stop();
      }
    },
    E2E_TIMEOUT_MS,
  );

  test(
    "with the gateway off, a SESSION is refused and says how to enable sessions",
    async () => {
      const d = await startDaemon({ gateway: false });
      try {
        const before = refusalFootprint(d);
        const r = await d.cli("session", "start");
        expect(r.code).toBe(1);
        expect(r.stdout + r.stderr).toContain("OPENAI4S_WORKER_LISTEN");
        expect(refusalFootprint(d)).toEqual(before);
      } finally {
        await d.stop();
      }
    },
    E2E_TIMEOUT_MS,
  );
});
