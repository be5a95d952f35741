/**
 * Crash tests with the real daemon and the real local backend: `kill -9` the daemon while a
 * job runs, and (through OPENAI4S_FAULT_POINT, which only tests set) at the two instants a
 * submission is in flight: the record is durable but nothing was started, and the
 * supervisor was started but the reconciler never heard about it. After a restart the
 * job's marker file must show it ran exactly once, and the workload must reach its TRUE
 * terminal phase (including a failure's exit code), never a guessed one.
 *
 * The daemon is the compiled binary when `dist/openai4s` is newer than every source file,
 * else `bun src/main.ts`.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { LOCAL_FAULT_POINTS } from "../../src/adapters/backend-local/backend-options.ts";
import { FAULT_POINT_ENV } from "../../src/lib/fault-point.ts";
import {
  cleanUpStates,
  jobFile,
  lines,
  makeState,
  readJson,
  type TestState,
  waitFor,
} from "../support/local-backend.ts";

const REPO = join(import.meta.dir, "../..");
const CRASH_TEST_TIMEOUT_MS = 90_000;

function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function daemonCommand(): readonly string[] {
  const binary = join(REPO, "dist/openai4s");
  if (existsSync(binary) && statSync(binary).mtimeMs > newestMtimeMs(join(REPO, "src"))) {
    return [binary];
  }
  return [process.execPath, join(REPO, "src/main.ts")];
}

const DAEMON = daemonCommand();

interface Daemon {
  readonly proc: Bun.Subprocess;
  readonly logPath: string;
}

const daemons: Bun.Subprocess[] = [];

afterEach(async () => {
  for (const proc of daemons.splice(0)) {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGKILL");
      await proc.exited;
    }
  }
  cleanUpStates();
});

function socketOf(state: TestState): string {
  return state.layout.apiSocket;
}

async function api(
  state: TestState,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<{ readonly status: number; readonly body: Record<string, unknown> }> {
  const response = await fetch(`http://localhost${path}`, {
    unix: socketOf(state),
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function startDaemon(state: TestState, faultPoint?: string): Promise<Daemon> {
  const logPath = join(state.root, `daemon-${daemons.length}.log`);
  const logFd = openSync(logPath, "a");
  const proc = Bun.spawn([...DAEMON, "serve", "--state-dir", state.root], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: state.root,
      LANG: "C.UTF-8",
      // Unsandboxed, so the jobs can write their markers outside their workspace: crash
      // recovery is what this file tests, the sandbox has tests of its own.
      OPENAI4S_BWRAP: join(state.scratch, "no-bwrap"),
      // These daemons die by SIGKILL, so nothing would remove their cgroups; limits have
      // tests of their own (limits-binary.test.ts).
      OPENAI4S_CGROUP_ROOT: "off",
      ...(faultPoint === undefined ? {} : { [FAULT_POINT_ENV]: faultPoint }),
    },
    stdio: ["ignore", logFd, logFd],
  });
  daemons.push(proc);
  const daemon = { proc, logPath };
  await waitFor(
    async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return "exited";
      try {
        return (await api(state, "GET", "/healthz")).status === 200 ? "up" : "down";
      } catch {
        return "down";
      }
    },
    (s) => s !== "down",
    30_000,
    50,
  );
  if (proc.exitCode !== null) {
    throw new Error(`daemon exited ${proc.exitCode}: ${readFileSync(logPath, "utf8")}`);
  }
  return daemon;
}

async function killDaemon(daemon: Daemon): Promise<void> {
  daemon.proc.kill("SIGKILL");
  await daemon.proc.exited;
}

async function submitBatch(state: TestState, command: readonly string[]): Promise<string | null> {
  let response: Awaited<ReturnType<typeof api>>;
  try {
    response = await api(state, "POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command,
    });
  } catch {
    // The daemon died (by its fault point) before answering: find the workload after restart.
    return null;
  }
  expect(response.status).toBe(201);
  return String(response.body["id"]);
}

async function onlyWorkloadId(state: TestState): Promise<string> {
  const { body } = await api(state, "GET", "/v1/workloads");
  const items = body["items"] as ReadonlyArray<Record<string, unknown>>;
  expect(items.length).toBe(1);
  return String(items[0]?.["id"]);
}

const TERMINAL = ["COMPLETED", "FAILED", "CANCELLED", "LOST"];

async function waitTerminal(state: TestState, id: string): Promise<Record<string, unknown>> {
  return waitFor(
    async () => (await api(state, "GET", `/v1/workloads/${id}`)).body,
    (w) => TERMINAL.includes(String(w["phase"])),
    30_000,
    100,
  );
}

/**
 * The job writes into its own workspace (its working directory): that is all of the state dir
 * a sandboxed job, running as an unprivileged uid, can reach.
 */
function jobScript(exitCode = 0): string[] {
  return ["sh", "-c", `echo run >> marker; sleep 2; echo done >> done; exit ${exitCode}`];
}

/** A file in the workspace of the one workload of `state`, once it exists. */
function workspaceFile(state: TestState, name: string): () => string {
  return () => {
    const root = join(state.layout.spool, "workloads");
    const ids = existsSync(root) ? readdirSync(root) : [];
    const [id] = ids;
    return ids.length === 1 && id !== undefined
      ? join(state.layout.workspaceDir(id), name)
      : join(state.root, "no-workspace-yet", name);
  };
}

describe(`crash recovery with the real daemon (${DAEMON.length === 1 ? "compiled" : "source"})`, () => {
  test(
    "kill -9 of the daemon while the job runs: it keeps running and completes once",
    async () => {
      const state = makeState();
      const marker = workspaceFile(state, "marker");
      const done = workspaceFile(state, "done");
      const first = await startDaemon(state);
      const id = await submitBatch(state, jobScript());
      expect(id).not.toBeNull();
      await waitFor(
        () => lines(marker()),
        (l) => l.length === 1,
        20_000,
      );
      // The supervisor is this very program re-invoked (compiled: the binary itself).
      const [token] = readdirSync(join(state.backendDir, "jobs"));
      const claim = readJson(jobFile(state, String(token), "claim.json"));
      const argv = readFileSync(`/proc/${claim["pid"]}/cmdline`, "utf8").split("\0");
      expect(argv.slice(0, DAEMON.length + 1)).toEqual([...DAEMON, "__supervise"]);
      await killDaemon(first);
      expect(lines(done())).toEqual([]);

      await startDaemon(state);
      const workload = await waitTerminal(state, String(id));
      expect(workload).toMatchObject({ phase: "COMPLETED", exitCode: 0 });
      expect(lines(marker())).toEqual(["run"]);
      expect(workload["allocations"]).toHaveLength(1);
      expect(lines(done())).toEqual(["done"]);
    },
    CRASH_TEST_TIMEOUT_MS,
  );

  test(
    "a job that fails while the daemon is down is FAILED with its exit code after the restart",
    async () => {
      const state = makeState();
      const marker = workspaceFile(state, "marker");
      const done = workspaceFile(state, "done");
      const first = await startDaemon(state);
      const id = await submitBatch(state, jobScript(3));
      await waitFor(
        () => lines(marker()),
        (l) => l.length === 1,
        20_000,
      );
      await killDaemon(first);
      // It ends (and its supervisor records the exit) with no daemon alive.
      await waitFor(
        () => lines(done()),
        (l) => l.length === 1,
        10_000,
      );

      await startDaemon(state);
      const workload = await waitTerminal(state, String(id));
      expect(workload).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
      expect(lines(marker())).toEqual(["run"]);
      expect(workload["allocations"]).toHaveLength(1);
    },
    CRASH_TEST_TIMEOUT_MS,
  );

  test(
    "kill -9 after the record is durable and before anything started: runs once after restart",
    async () => {
      const state = makeState();
      const marker = workspaceFile(state, "marker");
      const done = workspaceFile(state, "done");
      const crashing = await startDaemon(state, LOCAL_FAULT_POINTS.afterRecordBeforeSpawn);
      const submitted = await submitBatch(state, jobScript());
      await crashing.proc.exited;
      expect(crashing.proc.signalCode).toBe("SIGKILL");
      expect(lines(marker())).toEqual([]);

      await startDaemon(state);
      const id = submitted ?? (await onlyWorkloadId(state));
      const workload = await waitTerminal(state, id);
      expect(workload).toMatchObject({ phase: "COMPLETED", exitCode: 0 });
      expect(lines(marker())).toEqual(["run"]);
      expect(workload["allocations"]).toHaveLength(1);
      expect(lines(done())).toEqual(["done"]);
    },
    CRASH_TEST_TIMEOUT_MS,
  );

  test(
    "kill -9 after the supervisor started, before the handle was recorded: runs once",
    async () => {
      const state = makeState();
      const marker = workspaceFile(state, "marker");
      const done = workspaceFile(state, "done");
      const crashing = await startDaemon(state, LOCAL_FAULT_POINTS.afterSpawn);
      const submitted = await submitBatch(state, jobScript());
      await crashing.proc.exited;
      expect(crashing.proc.signalCode).toBe("SIGKILL");

      await startDaemon(state);
      const id = submitted ?? (await onlyWorkloadId(state));
      const workload = await waitTerminal(state, id);
      expect(workload).toMatchObject({ phase: "COMPLETED", exitCode: 0 });
      expect(lines(marker())).toEqual(["run"]);
      expect(workload["allocations"]).toHaveLength(1);
      expect(lines(done())).toEqual(["done"]);
    },
    CRASH_TEST_TIMEOUT_MS,
  );
});
