/**
 * A profile's environments through the built daemon on the local backend: a venv made by
 * `python3 -m venv --system-site-packages` holding a marker module, and an Lmod module file
 * of the test's own, loaded by the environment's module lines. `session start --env` runs
 * the kernel in it (the marker imports, the module's variable is set, the prefix is
 * read-only inside the sandbox); each environment is a kernelspec `PROFILE/ENV`; an unknown
 * name is a 400 naming it; an environment missing on the node ends the session naming the
 * path.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const TIMEOUT_MS = 90_000;
const LMOD_INIT = "/usr/share/lmod/lmod/init/bash";
const missing =
  spawnSync("/usr/bin/python3", ["-c", "import IPython, ipykernel"]).status !== 0
    ? "python3 lacks IPython/ipykernel"
    : existsSync(LMOD_INIT)
      ? null
      : `no ${LMOD_INIT} (apt-get install lmod)`;
if (missing !== null) console.log(`skipping the environments test: ${missing}`);

/** A venv with a marker module, and a module file beside it (the sandbox binds the prefix). */
function makeEnvironment(dir: string): string {
  const prefix = join(dir, "venv");
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
  writeFileSync(join(site, "o4s_marker.py"), 'WHERE = "the marker venv"\n');
  mkdirSync(join(prefix, "modulefiles", "marker"), { recursive: true });
  writeFileSync(
    join(prefix, "modulefiles", "marker", "1.0.lua"),
    'setenv("O4S_MODULE_MARK", "loaded by lmod")\n',
  );
  return prefix;
}

describe.skipIf(missing !== null)("profile environments on the local backend", () => {
  let dir: string;
  let d: Daemon;
  let prefix: string;
  let base: string;
  let token: string;

  beforeAll(async () => {
    ensureBuilt();
    dir = makeTempDir("o4s-envs-");
    prefix = makeEnvironment(dir);
    const profiles = join(dir, "profiles.toml");
    writeFileSync(
      profiles,
      `[profiles.default]
description = "sessions with environments"
allow_sessions = true
allow_batch = true
network = "host"

[profiles.default.environments.marker]
display_name = "Python (marker venv)"
prefix = "${prefix}"
modules = """
. ${LMOD_INIT}
module use ${prefix}/modulefiles
module load marker/1.0
"""

[profiles.default.environments.gone]
python = "${dir}/no-such-env/bin/python3"
`,
    );
    const port = await freePort();
    d = await startDaemon({
      env: {
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}`,
        OPENAI4S_LOCAL_PROFILES: profiles,
      },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    base = `http://127.0.0.1:${port}`;
    token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
  }, TIMEOUT_MS);

  afterAll(async () => {
    await d?.stop();
    if (dir) removeDir(dir);
  }, 40_000);

  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    });

  test("each environment is a kernelspec PROFILE/ENV with its display name", async () => {
    const specs = (await (await api("/api/kernelspecs")).json()) as {
      kernelspecs: Record<string, { spec: { display_name: string } }>;
    };
    expect(Object.keys(specs.kernelspecs).sort()).toEqual([
      "default",
      "default/gone",
      "default/marker",
    ]);
    expect(specs.kernelspecs["default/marker"]?.spec.display_name).toBe(
      "Python (marker venv) (default)",
    );
  });

  test(
    "session start --env runs the kernel in the venv, with the module loaded and the prefix read-only",
    async () => {
      const started = await d.cli("session", "start", "--env", "marker");
      expect(started.code).toBe(0);
      const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
      const ready = await d.cli("wait", id, "--until", "READY", "--timeout", "60s");
      if (ready.code !== 0)
        throw new Error(`not READY: ${ready.stdout}${ready.stderr}\n${d.log()}`);
      expect((await d.show(id)) as unknown as { environment: string }).toMatchObject({
        environment: "marker",
      });
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
      expect(body.output).toBe(`the marker venv | loaded by lmod | ${prefix}\nread-only: 30\n`);
      expect(existsSync(join(prefix, "planted"))).toBe(false);
      await d.cli("cancel", id);
    },
    TIMEOUT_MS,
  );

  test("an unknown environment is a 400 naming it, by the API and the CLI", async () => {
    const res = await api("/v1/workloads", {
      method: "POST",
      body: JSON.stringify({ kind: "SESSION", profile: "default", environment: "nope" }),
    });
    expect(res.status).toBe(400);
    const problem = (await res.json()) as { errors: { path: string; message: string }[] };
    expect(problem.errors).toEqual([
      {
        path: "environment",
        message: 'unknown environment "nope" on profile "default" (known: marker, gone)',
      },
    ]);
    const cli = await d.cli("session", "start", "--env", "nope");
    expect(cli.code).not.toBe(0);
    expect(cli.stderr).toContain('unknown environment "nope"');
  });

  test(
    "an environment missing on the node ends the session with the path named",
    async () => {
      const started = await d.cli("session", "start", "--env", "gone");
      expect(started.code).toBe(0);
      const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
      await d.cli("wait", id, "--timeout", "60s");
      const view = await d.show(id);
      expect(view.phase).toBe("FAILED");
      expect(view.message).toContain(`${dir}/no-such-env/bin/python3`);
    },
    TIMEOUT_MS,
  );
});
