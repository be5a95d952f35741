/**
 * The reproduction through the built binary: one job starts 2,500 processes, another
 * allocates 3.5 GB. With a root daemon each allocation gets a cgroup (v1 on these machines):
 * the first is held to its profile's pids limit, the second is killed at its memory limit
 * and ends FAILED/OUT_OF_MEMORY with the figures in its hint; no cgroup is left behind.
 * With cgroups turned off the rlimit fallback holds both, and diagnostics say which is in
 * force. Small limits (64 processes, 200 MiB) so the host never feels it.
 * Seen failing before limits existed: 2,500 processes started, 3.5 GB allocated, COMPLETED.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { cgroupDriver } from "../../src/adapters/backend-local/limit-enforcement.ts";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 90_000;
const LIMITS = { OPENAI4S_LOCAL_MEMORY_MB: "200", OPENAI4S_LOCAL_PIDS_MAX: "64" };

const FORK_BOMB = `
import subprocess
started = 0
procs = []
for i in range(2500):
    try:
        procs.append(subprocess.Popen(['sleep', '60']))
        started += 1
    except OSError:
        pass
print('started', started, flush=True)
for p in procs:
    p.kill()
`;
const MEMORY_HOG = "b = bytearray(3500 * 1024 * 1024); print('allocated', len(b), flush=True)";

interface Ended {
  readonly phase: string;
  readonly reason: string | null;
  readonly message: string | null;
  readonly hint: string | null;
  readonly out: string;
}

async function run(d: Daemon, code: string): Promise<Ended> {
  const r = await d.cli("submit", "--profile", "default", "--", "python3", "-c", code);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
  await d.cli("wait", id, "--timeout", "60s");
  const shown = await d.cli("show", id, "--json");
  const view = JSON.parse(shown.stdout) as Ended & { allocations: { id: string }[] };
  const out = await d.cli("logs", id);
  return { ...view, hint: view.hint ?? null, out: out.stdout };
}

async function diagnostics(d: Daemon): Promise<string> {
  const res = await fetch("http://localhost/v1/diagnostics", { unix: d.socket });
  return JSON.stringify(await res.json());
}

describe.skipIf(!IS_ROOT)("per-job limits through the binary, root daemon, cgroups", () => {
  let d: Daemon;
  beforeAll(async () => {
    await ensureBuilt();
    d = await startDaemon({ gateway: false, env: LIMITS });
  }, TIMEOUT_MS);
  afterAll(async () => {
    await d?.stop();
  });

  test(
    "2,500 processes: held to the profile's 64",
    async () => {
      const ended = await run(d, FORK_BOMB);
      const started = Number(/started (\d+)/.exec(ended.out)?.[1]);
      expect(started).toBeGreaterThan(0);
      expect(started).toBeLessThan(64);
      expect(ended.message).toContain("refused at its limit of 64 processes");
    },
    TIMEOUT_MS,
  );

  test(
    "3.5 GB: killed at 200 MiB, FAILED/OUT_OF_MEMORY with used-of-asked in its hint",
    async () => {
      const ended = await run(d, MEMORY_HOG);
      expect(ended.out).not.toContain("allocated");
      expect([ended.phase, ended.reason]).toEqual(["FAILED", "OUT_OF_MEMORY"]);
      expect(ended.hint).toMatch(/^used \d+ MiB of the 200 MiB asked for \(profile default\): /);
      expect(ended.hint).toContain("no profile here has more memory than default");
      console.log(`hint: ${ended.hint}`);
    },
    TIMEOUT_MS,
  );

  test(
    "one process OOM-killed ends the whole job (v1 kills only one), not a job left waiting",
    async () => {
      const r = await d.cli(
        "submit",
        "--profile",
        "default",
        "--",
        "/bin/sh",
        "-c",
        `python3 -c "${MEMORY_HOG}"; echo survived; sleep 600`,
      );
      const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
      await d.cli("wait", id, "--timeout", "30s");
      const view = await d.show(id);
      expect([view.phase, view.reason]).toEqual(["FAILED", "OUT_OF_MEMORY"]);
    },
    TIMEOUT_MS,
  );

  test(
    "diagnostics name the cgroups in force, and no job cgroup outlives its job",
    async () => {
      expect(await diagnostics(d)).toContain("limits: cgroup v1 per job");
      const found = cgroupDriver({
        cgroupRoot: null,
        backendDir: join(d.stateDir, "backends", "local"),
      });
      if (found.kind !== "Driver") throw new Error("no cgroup driver");
      expect(found.driver.jobNames()).toEqual([]);
    },
    TIMEOUT_MS,
  );

  test(
    "once its jobs ended, no cgroup directory of the daemon is left, its root included",
    async () => {
      const found = cgroupDriver({
        cgroupRoot: null,
        backendDir: join(d.stateDir, "backends", "local"),
      });
      if (found.kind !== "Driver") throw new Error("no cgroup driver");
      const roots = found.driver.where.split(", ");
      // Checked with the daemon running: the harness's own cleanup at stop would hide a leak.
      await eventually(() => roots.every((root) => !existsSync(root)), {
        what: `${roots.join(", ")} removed`,
      });
    },
    TIMEOUT_MS,
  );
});

describe.skipIf(!IS_ROOT)("per-job limits through the binary, no cgroups: rlimits", () => {
  let d: Daemon;
  beforeAll(async () => {
    await ensureBuilt();
    d = await startDaemon({ gateway: false, env: { ...LIMITS, OPENAI4S_CGROUP_ROOT: "off" } });
  }, TIMEOUT_MS);
  afterAll(async () => {
    await d?.stop();
  });

  test(
    "the same reproduction is held by RLIMIT_NPROC and RLIMIT_AS; diagnostics say so",
    async () => {
      const bomb = await run(d, FORK_BOMB);
      const started = Number(/started (\d+)/.exec(bomb.out)?.[1]);
      // RLIMIT_NPROC counts every process of the job's uid on the host, so at most 64.
      expect(Number.isNaN(started) || started < 64).toBe(true);
      const hog = await run(d, MEMORY_HOG);
      expect(hog.out).not.toContain("allocated");
      expect(hog.phase).toBe("FAILED");
      expect(await diagnostics(d)).toContain(
        "limits: rlimits only (RLIMIT_NPROC per uid, RLIMIT_AS) via prlimit: OPENAI4S_CGROUP_ROOT=off",
      );
    },
    TIMEOUT_MS,
  );
});

describe.skipIf(!IS_ROOT)("per-job limits through the binary, a daemon that is not root", () => {
  // Not the containment suite's uid: RLIMIT_NPROC counts every process of the uid.
  const UID = 4247;
  let d: Daemon;
  beforeAll(async () => {
    await ensureBuilt();
    d = await startDaemon({
      gateway: false,
      daemonUid: UID,
      env: {
        PATH: "/usr/local/bin:/usr/bin:/bin",
        HOME: "/nonexistent",
        OPENAI4S_LOCAL_MEMORY_MB: "200",
        OPENAI4S_LOCAL_PIDS_MAX: "200",
      },
    });
  }, TIMEOUT_MS);
  afterAll(async () => {
    await d?.stop();
  });

  test(
    "no cgroups to create: rlimits hold the reproduction, and diagnostics say why",
    async () => {
      const bomb = await run(d, FORK_BOMB);
      const started = Number(/started (\d+)/.exec(bomb.out)?.[1]);
      // The daemon's own threads count against the same uid's RLIMIT_NPROC.
      expect(started).toBeGreaterThan(0);
      expect(started).toBeLessThan(200);
      const hog = await run(d, MEMORY_HOG);
      expect(hog.out).not.toContain("allocated");
      expect(hog.phase).toBe("FAILED");
      const said = await diagnostics(d).catch((error) => String(error));
      expect(said).toContain(
        "limits: rlimits only (RLIMIT_NPROC per uid, RLIMIT_AS) via prlimit: cannot create cgroups under",
      );
    },
    TIMEOUT_MS,
  );
});
