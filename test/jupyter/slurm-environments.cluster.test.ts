/**
 * A profile environment on the REAL Slurm dev cluster (gated on OPENAI4S_SLURM_TEST_DIR):
 * cluster.toml declares a venv (made by `python3 -m venv --system-site-packages`, holding a
 * marker module) with an Lmod module line; `session start --env` runs the kernel on a node
 * in it, the prefix bound read-only in the node's sandbox. An environment whose prefix is on no
 * node, or whose module line fails there, ends the session FAILED naming the path (or the
 * line) and the node, as the worker found it there (before: FAILED "exit code 1").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const LMOD_INIT = "/usr/share/lmod/lmod/init/bash";

describe.skipIf(testCluster === null)("a profile environment on the Slurm cluster", () => {
  const cluster = testCluster as TestCluster;
  let d: Daemon;
  let scratch: string;
  let prefix: string;

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-slurm-envs-");
    // The nodes run as other uids: the venv must be readable by them.
    chmodSync(scratch, 0o755);
    prefix = join(scratch, "venv");
    const made = spawnSync("/usr/bin/python3", [
      "-m",
      "venv",
      "--system-site-packages",
      "--without-pip",
      prefix,
    ]);
    if (made.status !== 0) throw new Error(`venv: ${made.stderr}`);
    const site = spawnSync(
      join(prefix, "bin", "python"),
      ["-c", "import site; print(site.getsitepackages()[0])"],
      {
        encoding: "utf8",
      },
    ).stdout.trim();
    writeFileSync(join(site, "o4s_marker.py"), 'WHERE = "the marker venv on a node"\n');
    mkdirSync(join(prefix, "modulefiles", "marker"), { recursive: true });
    writeFileSync(
      join(prefix, "modulefiles", "marker", "1.0.lua"),
      'setenv("O4S_MODULE_MARK", "loaded by lmod")\n',
    );
    const config = join(scratch, "cluster.toml");
    writeFileSync(
      config,
      `[profiles.one]
description = "One node for a kernel"
partition = "debug"
nodes = 1
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = false

[profiles.one.environments.marker]
display_name = "Python (marker venv)"
prefix = "${prefix}"
modules = """
. ${LMOD_INIT}
module use ${prefix}/modulefiles
module load marker/1.0
"""

[profiles.one.environments.gone]
prefix = "${scratch}/no-such-env"

[profiles.one.environments.badmodule]
prefix = "${prefix}"
modules = """
. ${LMOD_INIT}
module load no-such-module/9
"""
`,
    );
    const port = await freePort();
    d = await startDaemon({
      args: ["--backend", "slurm", "--cluster-config", config, "--listen", `127.0.0.1:${port}`],
      env: {
        SLURM_CONF: cluster.slurmConf,
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}:/usr/sbin:/sbin`,
      },
      startTimeoutMs: 120_000,
    });
    await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
      what: "session isolation verified on the nodes",
      timeoutMs: 120_000,
    });
  }, 240_000);

  afterAll(async () => {
    await d?.stop();
    if (scratch) removeDir(scratch);
  }, 60_000);

  test("session start --env runs the kernel on a node in the venv, module loaded, prefix read-only", async () => {
    const started = await d.cli("session", "start", "--profile", "one", "--env", "marker");
    expect(started.code).toBe(0);
    const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
    const ready = await d.cli("wait", id, "--until", "READY", "--timeout", "120s");
    if (ready.code !== 0) throw new Error(`not READY: ${ready.stdout}${ready.stderr}\n${d.log()}`);
    const code = [
      "import os, sys, o4s_marker",
      "print(o4s_marker.WHERE, '|', os.environ.get('O4S_MODULE_MARK'), '|', sys.prefix)",
      "try:",
      "    open(os.path.join(sys.prefix, 'planted'), 'w')",
      "    print('WRITABLE')",
      "except OSError as e:",
      "    print('read-only:', e.errno)",
    ].join("\n");
    const r = await d.cli("exec", id, code, "--json");
    const body = JSON.parse(r.stdout) as { status: string; output: string };
    expect(body.status).toBe("OK");
    expect(body.output).toBe(
      `the marker venv on a node | loaded by lmod | ${prefix}\nread-only: 30\n`,
    );
    expect(existsSync(join(prefix, "planted"))).toBe(false);
    await d.cli("cancel", id);
  }, 240_000);

  /** Starts a session with `env` and waits (bounded) for it to end; its view. */
  async function endedSession(env: string) {
    const started = await d.cli("session", "start", "--profile", "one", "--env", env);
    expect(started.code).toBe(0);
    const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
    return eventually(
      async () => {
        const view = await d.show(id);
        return view.phase === "FAILED" || view.phase === "COMPLETED" || view.phase === "CANCELLED"
          ? view
          : null;
      },
      { what: `session ${id} (--env ${env}) ended`, timeoutMs: 90_000, intervalMs: 250 },
    );
  }

  test("an environment whose prefix is on no node ends the session FAILED naming the path and node", async () => {
    const view = await endedSession("gone");
    expect({ phase: view.phase, reason: view.reason }).toEqual({
      phase: "FAILED",
      reason: "ENVIRONMENT_UNAVAILABLE",
    });
    expect(view.message).toContain(`environment "gone": ${scratch}/no-such-env`);
    expect(view.message).toMatch(/is not on node n[12]\b/);
  }, 120_000);

  test("a module line that fails on the node ends the session FAILED naming the line and node", async () => {
    const view = await endedSession("badmodule");
    expect({ phase: view.phase, reason: view.reason }).toEqual({
      phase: "FAILED",
      reason: "ENVIRONMENT_UNAVAILABLE",
    });
    expect(view.message).toContain(
      'environment "badmodule": module line "module load no-such-module/9" failed',
    );
    expect(view.message).toMatch(/on node n[12]\b/);
  }, 120_000);
});
