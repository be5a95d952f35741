/**
 * The daemon as users run it: `bun src/main.ts serve --state-dir TMP` in its own process,
 * spoken to through its unix socket with curl and with the client commands, then stopped
 * with SIGTERM. Real processes, so waits poll with deadlines.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "../support/eventually.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const ROOT = join(import.meta.dir, "..", "..");
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const MAIN = join(ROOT, "src", "main.ts");
/** Real processes: generous per-test deadlines; the polls below have their own. */
const TEST_TIMEOUT_MS = 60_000;

let stateDir: string;
let socket: string;
let daemon: ReturnType<typeof Bun.spawn>;
let daemonLog = "";

async function curl(method: string, path: string, body?: unknown) {
  const args = ["curl", "-sS", "--unix-socket", socket, "-X", method, "-w", "\n%{http_code}"];
  if (body !== undefined)
    args.push("-H", "Content-Type: application/json", "-d", JSON.stringify(body));
  args.push(`http://localhost${path}`);
  const proc = Bun.spawn(args, { stdout: "pipe", stderr: "pipe" });
  const text = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  const cut = text.lastIndexOf("\n");
  return { status: Number(text.slice(cut + 1)), body: JSON.parse(text.slice(0, cut)) as never };
}

async function cli(command: string, ...args: string[]) {
  const proc = Bun.spawn([BUN, MAIN, command, "--server", `unix:${socket}`, ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, OPENAI4S_SERVER: "" },
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { out, err, code };
}

async function until<T>(
  what: string,
  probe: () => Promise<T | null>,
  timeoutMs = 15_000,
): Promise<T> {
  try {
    return await eventually(probe, { what, timeoutMs, intervalMs: 100 });
  } catch (error) {
    // The daemon's log says why, read at the deadline.
    throw new Error(`${(error as Error).message}\n${daemonLog}`);
  }
}

async function phaseOf(id: string): Promise<string> {
  const { body } = await curl("GET", `/v1/workloads/${id}`);
  return (body as { phase: string }).phase;
}

beforeAll(async () => {
  stateDir = makeTempDir("o4s-e2e-");
  socket = join(stateDir, "api.sock");
  daemon = Bun.spawn([BUN, MAIN, "serve", "--state-dir", stateDir], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, OPENAI4S_WORKER_LISTEN: "" },
  });
  (async () => {
    for await (const chunk of daemon.stderr as ReadableStream<Uint8Array>) {
      daemonLog += new TextDecoder().decode(chunk);
    }
  })();
  await until("the socket", async () => (existsSync(socket) ? true : null));
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  if (daemon.exitCode === null) daemon.kill("SIGKILL");
  // Gone before its files are removed: a dying daemon still preparing a job re-creates them.
  await daemon.exited;
  removeDir(stateDir);
  // The default spool is the sibling STATE_DIR-spool.
  rmSync(`${stateDir}-spool`, { recursive: true, force: true });
});

describe("openai4s serve over its unix socket", () => {
  test(
    "the socket is 0600 and answers /healthz",
    async () => {
      expect(statSync(socket).mode & 0o777).toBe(0o600);
      expect(await curl("GET", "/healthz")).toEqual({
        status: 200,
        body: { status: "ok" } as never,
      });
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "a BATCH `echo hi` runs to COMPLETED, and its events tell the story",
    async () => {
      const created = await curl("POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        command: ["echo", "hi"],
      });
      expect(created.status).toBe(201);
      const id = (created.body as { id: string }).id;
      await until("COMPLETED", async () => ((await phaseOf(id)) === "COMPLETED" ? true : null));
      const shown = await curl("GET", `/v1/workloads/${id}`);
      expect(shown.body).toMatchObject({ phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 });
      const events = await curl("GET", `/v1/workloads/${id}/events`);
      const phases = (events.body as { phase: string }[]).map((e) => e.phase);
      expect(phases[0]).toBe("PENDING");
      expect(phases.at(-1)).toBe("COMPLETED");
      expect(phases).toContain("SUBMITTING");
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "a bad request is a problem naming the field, and nothing is created",
    async () => {
      const before = await curl("GET", "/v1/workloads?limit=500");
      const res = await curl("POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        cmd: ["x"],
      });
      expect(res.status).toBe(400);
      const paths = (res.body as { errors: { path: string }[] }).errors.map((e) => e.path);
      expect(paths).toContain("cmd");
      const after = await curl("GET", "/v1/workloads?limit=500");
      expect((after.body as { items: unknown[] }).items.length).toBe(
        (before.body as { items: unknown[] }).items.length,
      );
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "the client commands: submit, wait, show, list",
    async () => {
      const submitted = await cli("submit", "--name", "greeting", "--", "sh", "-c", "echo hello");
      expect(submitted.err).toBe("");
      expect(submitted.code).toBe(0);
      const id = submitted.out.trim();
      const waited = await cli("wait", id, "--timeout", "30s");
      expect(waited.code).toBe(0);
      expect(waited.out).toContain("COMPLETED");
      const shown = await cli("show", id, "--json");
      expect(JSON.parse(shown.out)).toMatchObject({ id, name: "greeting", phase: "COMPLETED" });
      const listed = await cli("list");
      expect(listed.out).toContain(id);
      const failing = await cli("submit", "--", "sh", "-c", "exit 3");
      const failed = await cli("wait", failing.out.trim(), "--timeout", "30s");
      // The job's own exit code, as a scheduler's submit-and-wait returns it.
      expect(failed.code).toBe(3);
      expect(failed.err).toContain("FAILED");
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "cancelling a `sleep 60` ends it CANCELLED",
    async () => {
      const created = await curl("POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        command: ["sleep", "60"],
      });
      const id = (created.body as { id: string }).id;
      await until("RUNNING", async () => ((await phaseOf(id)) === "RUNNING" ? true : null));
      const cancelled = await curl("POST", `/v1/workloads/${id}/cancel`);
      expect(cancelled.status).toBe(202);
      expect((await curl("POST", `/v1/workloads/${id}/cancel`)).status).toBe(202);
      await until("CANCELLED", async () => ((await phaseOf(id)) === "CANCELLED" ? true : null));
      const shown = await curl("GET", `/v1/workloads/${id}`);
      expect(shown.body).toMatchObject({ phase: "CANCELLED", reason: "USER_CANCELLED" });
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "SIGTERM: exit 0, socket removed",
    async () => {
      daemon.kill("SIGTERM");
      const code = await Promise.race([daemon.exited, Bun.sleep(15_000).then(() => "hung")]);
      expect(code).toBe(0);
      expect(existsSync(socket)).toBe(false);
      expect(daemonLog).toContain('"message":"daemon stopped"');
    },
    TEST_TIMEOUT_MS,
  );
});
