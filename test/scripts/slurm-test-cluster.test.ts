import { afterAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { eventually } from "../support/eventually.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SCRIPT = join(import.meta.dir, "..", "..", "scripts", "slurm-test-cluster.sh");
const CLUSTER_DIR = process.env["OPENAI4S_SLURM_TEST_DIR"];
const IS_ROOT = process.getuid?.() === 0;

const spawned: Bun.Subprocess[] = [];
afterAll(() => {
  for (const p of spawned) {
    if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  }
});
// After the hook above: the processes are killed before their dirs go.
const tempDir = tempDirs("o4s-cluster-script-");

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function script(args: readonly string[], env: Record<string, string> = {}): Promise<Ran> {
  const proc = Bun.spawn(["bash", SCRIPT, ...args], {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  // Reading to EOF also proves no daemon kept our pipes open.
  const [stdout, stderr] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
  ]);
  return { code: await proc.exited, stdout, stderr };
}

function gone(proc: Bun.Subprocess): Promise<boolean> {
  return Promise.race([
    proc.exited.then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5_000)),
  ]);
}

describe("the script itself", () => {
  test("parses", () => {
    const r = Bun.spawnSync(["bash", "-n", SCRIPT]);
    expect(r.stderr.toString()).toBe("");
    expect(r.exitCode).toBe(0);
  });

  test.skipIf(Bun.which("shellcheck") === null)("is clean under shellcheck", () => {
    const r = Bun.spawnSync(["shellcheck", SCRIPT]);
    expect(r.stdout.toString()).toBe("");
    expect(r.exitCode).toBe(0);
  });

  test("refuses a DIR it could not write into slurm.conf unquoted", async () => {
    const r = await script(["status", join(tempDir(), "a b")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("DIR may contain only");
  });

  test("down on a DIR that does not exist stops nothing and succeeds", async () => {
    const r = await script(["down", join(tempDir(), "never-created")]);
    expect(r.code).toBe(0);
  });

  test("status on a DIR without a cluster fails", async () => {
    const r = await script(["status", tempDir()]);
    expect(r.code).toBe(1);
  });
});

describe("down stops only what is its own", () => {
  // Stand-ins for daemons: a shell copied under a daemon's name (so /proc/PID/comm says so),
  // looping on sleep so its command line stays what we gave it.
  const shell = ["/usr/bin/dash", "/bin/dash", "/bin/bash"].find((p) => existsSync(p)) as string;

  function impostor(
    binDir: string,
    name: string,
    marker: string,
    env: Record<string, string> = {},
  ): Bun.Subprocess {
    const exe = join(binDir, name);
    if (!existsSync(exe)) copyFileSync(shell, exe);
    Bun.spawnSync(["chmod", "755", exe]);
    const proc = Bun.spawn([exe, "-c", "while :; do sleep 1; done", marker], {
      env: { PATH: "/usr/bin:/bin", ...env },
      stdout: "ignore",
      stderr: "ignore",
    });
    spawned.push(proc);
    return proc;
  }

  test("by name, command line and environment; never a stranger behind a PID file", async () => {
    const dir = tempDir();
    const elsewhere = tempDir();
    mkdirSync(join(dir, "run"));
    mkdirSync(join(dir, "etc"));
    const pidfile = (name: string, proc: Bun.Subprocess) =>
      writeFileSync(join(dir, "run", `${name}.pid`), `${proc.pid}\n`);

    // Ours: the right name and DIR on the command line.
    const munged = impostor(elsewhere, "munged", `${dir}/munge/munge.sock`);
    pidfile("munged", munged);
    // Ours: the right name, DIR only in SLURM_CONF (how slurmdbd finds its configuration).
    const slurmdbd = impostor(elsewhere, "slurmdbd", "x", {
      SLURM_CONF: `${dir}/etc/slurm.conf`,
    });
    pidfile("slurmdbd", slurmdbd);
    // Strangers: the right name but nothing pointing at DIR; the wrong name pointing at DIR;
    // and a process of another DIR whose name starts with ours.
    const mariadbd = impostor(elsewhere, "mariadbd", `${elsewhere}/mysql`);
    pidfile("mariadbd", mariadbd);
    const wrongName = impostor(elsewhere, "not-slurmctld", `${dir}/etc/slurm.conf`);
    pidfile("slurmctld", wrongName);
    const prefixed = impostor(elsewhere, "slurmd", `${dir}-other/etc/slurm.conf`);
    pidfile("slurmd-n1", prefixed);

    const r = await script(["down", dir]);
    expect(r.code).toBe(0);
    expect(await gone(munged)).toBe(true);
    expect(await gone(slurmdbd)).toBe(true);
    for (const stranger of [mariadbd, wrongName, prefixed]) {
      expect(stranger.exitCode).toBeNull();
      expect(stranger.signalCode).toBeNull();
    }
    expect(r.stdout).toContain("munged: stopped");
    expect(r.stdout).toContain("slurmdbd: stopped");
    expect(r.stdout).toContain("mariadbd: not running");
    expect(r.stdout).toContain("slurmctld: not running");
    expect(r.stdout).toContain("slurmd-n1: not running");
  });
});

describe.skipIf(CLUSTER_DIR === undefined)("the shared dev/CI cluster", () => {
  // Shared: another suite may have its controller stopped for a few seconds. Poll.
  async function statusWhenUp(): Promise<Ran> {
    let r = await script(["status", CLUSTER_DIR as string]);
    const up = async () => {
      r = await script(["status", CLUSTER_DIR as string]);
      return r.code === 0;
    };
    // The caller asserts on the last answer, which says more than a timeout would.
    await eventually(up, { timeoutMs: 60_000, intervalMs: 1_000 }).catch(() => {});
    return r;
  }

  test("status says every daemon is up", async () => {
    const r = await statusWhenUp();
    expect(r.code).toBe(0);
    for (const d of ["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd-n1", "slurmd-n2"]) {
      expect(r.stdout).toMatch(new RegExp(`${d}: running \\(pid [0-9]+\\)`));
    }
  }, 90_000);

  test("a two-node job runs one task per node: ranks 0 and 1 on n1 and n2", async () => {
    expect((await statusWhenUp()).code).toBe(0);
    const r = await script(["smoke", CLUSTER_DIR as string]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/ran ranks 0 1 on hosts n1 n2 /);
  }, 90_000);
});

describe.skipIf(CLUSTER_DIR === undefined || !IS_ROOT)("a whole lifecycle on a fresh DIR", () => {
  test("up, up again, stop-ctld/start-ctld, restart-ctld, down", async () => {
    const parent = tempDir();
    // munged's socket must be reachable through every directory above it (the script checks).
    chmodSync(parent, 0o755);
    const dir = join(parent, "cluster");
    // Its own ports: the shared cluster on the defaults keeps running beside it.
    const base = String(30_000 + 10 * Math.floor(Math.random() * 3_000));
    const env = { O4S_SLURM_PORT_BASE: base };
    try {
      const up = await script(["up", dir], env);
      expect(up.stderr).toBe("");
      expect(up.code).toBe(0);
      expect(readFileSync(join(dir, "etc", "slurm.conf"), "utf8")).toContain(
        `SlurmctldPort=${base}`,
      );
      expect(readFileSync(join(dir, "env"), "utf8")).toContain(
        `export SLURM_CONF=${dir}/etc/slurm.conf`,
      );
      expect(existsSync(join(dir, "READY"))).toBe(true);

      const again = await script(["up", dir]);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain("already up");

      expect((await script(["stop-ctld", dir])).code).toBe(0);
      const down = await script(["status", dir]);
      expect(down.code).toBe(1);
      expect(down.stdout).toContain("slurmctld: NOT running");
      expect((await script(["start-ctld", dir])).code).toBe(0);
      expect((await script(["status", dir])).code).toBe(0);

      expect((await script(["restart-ctld", dir, "--job-comment=off"])).code).toBe(0);
      expect(readFileSync(join(dir, "etc", "slurm.conf"), "utf8")).not.toMatch(
        /^AccountingStoreFlags=/m,
      );
      expect((await script(["restart-ctld", dir, "--job-comment=on"])).code).toBe(0);
      expect(readFileSync(join(dir, "etc", "slurm.conf"), "utf8")).toMatch(
        /^AccountingStoreFlags=job_comment$/m,
      );
      expect((await script(["smoke", dir])).code).toBe(0);
    } finally {
      const stopped = await script(["down", dir]);
      expect(stopped.code).toBe(0);
    }
    const after = await script(["status", dir]);
    expect(after.code).toBe(1);
    expect(after.stdout).not.toContain(": running");
    expect(existsSync(join(dir, "READY"))).toBe(false);
  }, 300_000);
});
