/**
 * A job's environment is exactly the documented one, on the REAL cluster: the service
 * account's login files never run for a job.
 *
 * The service account here is a throwaway user whose home is a temp dir with a `.profile` and
 * a `.bashrc` that export a canary (root's real dotfiles are not touched). The scheduler's
 * commands run as that user through `setpriv`, which is what a daemon running under that
 * account does. A control job submitted the way the broker used to (an explicit `--export`
 * list) shows that the setup does detect the leak: on 22.05 such a list implies
 * --get-user-env, which runs the account's login shell.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import type { BatchSpec } from "../../src/adapters/backend-slurm/broker-argv.ts";
import { createProgramRunner, type ProgramRunner } from "../../src/lib/process-runner.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { newToken } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CANARY = "O4S_DOTFILE_CANARY";
const isRoot = process.getuid?.() === 0;

/** Runs every scheduler command as `uid:gid` (setpriv), resolving it as the broker would. */
function asUser(uid: number, gid: number): ProgramRunner {
  const real = createProgramRunner();
  return {
    run(request) {
      const program = request.program.startsWith("/")
        ? request.program
        : (Bun.which(request.program, { PATH: request.searchPath ?? request.env["PATH"] ?? "" }) ??
          request.program);
      return real.run({
        ...request,
        program: "/usr/bin/setpriv",
        args: [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", program, ...request.args],
      });
    },
  };
}

async function waitForFile(path: string, deadlineMs: number): Promise<string> {
  const written = () => {
    const text = existsSync(path) ? readFileSync(path, "utf8") : "";
    return text.includes("END-OF-ENV") ? text : null;
  };
  return await eventually(written, { what: path, timeoutMs: deadlineMs, intervalMs: 200 });
}

describe.skipIf(testCluster === null || !isRoot)("slurm-cluster job environment", () => {
  const cluster = testCluster as TestCluster;
  const user = `o4senv${process.pid}`;
  let home: string;
  let uid: number;
  let gid: number;
  let broker: SlurmBroker;

  beforeAll(() => {
    home = makeTempDir("o4s-env-home-");
    const added = Bun.spawnSync({
      cmd: ["useradd", "-M", "-d", home, "-s", "/bin/bash", "-U", user],
      stderr: "pipe",
    });
    if (added.exitCode !== 0) throw new Error(`useradd: ${added.stderr.toString()}`);
    const ids = Bun.spawnSync({ cmd: ["id", "-u", user], stdout: "pipe" }).stdout.toString();
    const gids = Bun.spawnSync({ cmd: ["id", "-g", user], stdout: "pipe" }).stdout.toString();
    uid = Number(ids.trim());
    gid = Number(gids.trim());
    for (const f of [".profile", ".bashrc", ".bash_profile"]) {
      writeFileSync(join(home, f), `export ${CANARY}=from-${f}\n`);
      chownSync(join(home, f), uid, gid);
    }
    chownSync(home, uid, gid);
    chmodSync(home, 0o755);
    broker = createSlurmBroker({
      path: cluster.path,
      slurmConf: cluster.slurmConf,
      runner: asUser(uid, gid),
    });
  });

  afterAll(() => {
    Bun.spawnSync({
      cmd: ["scancel", `--user=${user}`],
      env: { ...process.env, SLURM_CONF: cluster.slurmConf },
    });
    Bun.spawnSync({ cmd: ["userdel", user], stderr: "pipe" });
    removeDir(home);
  });

  function spec(name: string): BatchSpec {
    const dir = join(home, name);
    mkdirSync(dir);
    const script = join(dir, "job.sh");
    writeFileSync(script, "#!/bin/sh\nenv > env.txt\necho END-OF-ENV >> env.txt\n", {
      mode: 0o700,
    });
    chownSync(dir, uid, gid);
    chownSync(script, uid, gid);
    const token = newToken();
    return {
      jobName: token,
      comment: token,
      scriptPath: script,
      workDir: dir,
      stdoutPath: join(dir, "stdout.log"),
      stderrPath: join(dir, "stderr.log"),
      partition: null,
      qos: null,
      account: null,
      nodes: 1,
      cpusPerTask: 1,
      gpusPerNode: 0,
      memoryMb: 50,
      timeLimitMinutes: 2,
      env: { PATH: "/usr/bin:/bin", HOME: home, LANG: "C.UTF-8", MODE: "documented" },
    };
  }

  function variables(text: string): Map<string, string> {
    const out = new Map<string, string>();
    for (const line of text.split("\n")) {
      const eq = line.indexOf("=");
      if (eq > 0) out.set(line.slice(0, eq), line.slice(eq + 1));
    }
    return out;
  }

  test("the control: an explicit --export list runs the login files (the leak is detectable)", async () => {
    const s = spec("control");
    const listed = Bun.spawnSync({
      cmd: [
        "/usr/bin/setpriv",
        `--reuid=${uid}`,
        `--regid=${gid}`,
        "--clear-groups",
        "sbatch",
        "--parsable",
        `--chdir=${s.workDir}`,
        `--output=${s.stdoutPath}`,
        "--time=2",
        "--mem=50M",
        "--export=PATH=/usr/bin:/bin,MODE=documented",
        s.scriptPath,
      ],
      env: { PATH: cluster.path, SLURM_CONF: cluster.slurmConf },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(listed.stderr.toString()).toBe("");
    const env = variables(await waitForFile(join(s.workDir, "env.txt"), 30_000));
    expect(env.get(CANARY)).toStartWith("from-");
  }, 40_000);

  test("the broker's job sees exactly its env: no login file ran, nothing of the daemon", async () => {
    process.env["O4S_DAEMON_CANARY"] = "must-not-reach-the-job";
    const s = spec("broker");
    const submitted = await broker.submitBatch(s);
    expect(submitted.kind).toBe("Answered");
    const env = variables(await waitForFile(join(s.workDir, "env.txt"), 30_000));
    delete process.env["O4S_DAEMON_CANARY"];
    expect(env.has(CANARY)).toBe(false);
    expect(env.has("O4S_DAEMON_CANARY")).toBe(false);
    expect(env.has("SLURM_GET_USER_ENV")).toBe(false);
    expect(env.get("MODE")).toBe("documented");
    expect(env.get("PATH")).toBe("/usr/bin:/bin");
    expect(env.get("HOME")).toBe(home);
    expect(env.get("LANG")).toBe("C.UTF-8");
    // Everything else is the scheduler's own (SLURM_*, and what slurmstepd always sets).
    const ours = new Set(["MODE", "PATH", "HOME", "LANG", "SLURM_CONF", "PWD", "OLDPWD"]);
    const scheduler = new Set([
      "ENVIRONMENT",
      "HOSTNAME",
      "TMPDIR",
      "SLURMD_NODENAME",
      "SHLVL",
      "_",
    ]);
    const extra = [...env.keys()].filter(
      (k) => !ours.has(k) && !scheduler.has(k) && !k.startsWith("SLURM_"),
    );
    expect(extra).toEqual([]);
  }, 40_000);
});
