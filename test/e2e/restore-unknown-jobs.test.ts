/**
 * After a restore, a local job started after the backup runs on, unknown to the restored
 * store: the daemon never adopts it. `openai4s restore` names it once, with its workload,
 * and `--cancel-unknown-jobs` stops it; a job the copy knows is neither listed nor stopped.
 * Through the built binary, on a daemon stopped the way an admin stops it (SIGTERM: local
 * jobs keep running).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import {
  BINARY,
  type Daemon,
  ensureBuilt,
  processesMentioning,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

let d: Daemon;
let restarted: Daemon | undefined;

beforeAll(async () => {
  ensureBuilt();
  d = await startDaemon({ gateway: false });
}, 120_000);

afterAll(async () => {
  await restarted?.stop();
  await d?.stop();
});

async function submitSleep(): Promise<string> {
  const r = await d.cli("submit", "--", "sleep", "600");
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) as string;
  await eventually(async () => (await d.show(id)).phase === "RUNNING", {
    timeoutMs: 20_000,
    what: `${id} to run`,
  });
  return id;
}

async function restore(...extra: string[]) {
  const p = Bun.spawn(
    [BINARY, "restore", join(d.dir, "copy.db"), "--state-dir", d.stateDir, ...extra],
    {
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: d.dir },
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

const jobProcesses = (id: string) => processesMentioning(join("workloads", id, "workspace"));

test("restore lists the running local jobs the copy does not know, and stops them when asked", async () => {
  const known = await submitSleep();
  const backup = await d.cli("backup", join(d.dir, "copy.db"));
  expect(backup.code).toBe(0);
  const unknown = await submitSleep();
  d.proc.kill("SIGTERM");
  await d.proc.exited;
  expect(jobProcesses(unknown).length).toBeGreaterThan(0);

  const listed = await restore();
  expect(listed.err).toBe("");
  expect(listed.code).toBe(0);
  expect(listed.out).toContain("1 local job(s) run but are unknown to the copy");
  expect(listed.out).toContain(`  ${unknown} (allocation `);
  expect(listed.out).not.toContain(known);
  expect(jobProcesses(unknown).length).toBeGreaterThan(0);

  const cancelled = await restore("--cancel-unknown-jobs");
  expect(cancelled.code).toBe(0);
  expect(cancelled.out).toContain(`  ${unknown} (allocation `);
  expect(cancelled.out).toContain("asked to stop");
  await eventually(() => jobProcesses(unknown).length === 0, {
    timeoutMs: 20_000,
    what: "the unknown job to end",
  });
  expect(jobProcesses(known).length).toBeGreaterThan(0);
  // Its record is set aside, so the restored daemon does not warn about it at every start.
  expect(cancelled.out).toContain("records of 1 ended job(s) unknown to the copy moved to");

  restarted = await startDaemon({ gateway: false, stateDir: d.stateDir });
  const server = restarted;
  await eventually(
    async () => {
      const metrics = await fetch("http://localhost/metrics", { unix: server.socket });
      const line = (await metrics.text()).match(
        /^openai4s_reconciler_last_tick_timestamp_seconds ([0-9.e+]+)$/m,
      );
      return Number(line?.[1] ?? 0) > 0;
    },
    { timeoutMs: 20_000, what: "a first tick of the restored daemon" },
  );
  expect(restarted.log()).not.toContain("the store does not know");
  expect((await restarted.show(known)).phase).toBe("RUNNING");
}, 90_000);
