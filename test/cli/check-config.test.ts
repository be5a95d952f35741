import { describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CommandIo } from "../../src/lib/command/command.ts";
import { main } from "../../src/main.ts";
import { eventually } from "../support/eventually.ts";
import { tempDirs } from "../support/temp-dir.ts";

const EXAMPLE = join(import.meta.dir, "..", "..", "cluster.toml.example");
const tempDir = tempDirs("o4s-check-config-");

function captureIo(env: Record<string, string | undefined> = {}) {
  let out = "";
  let err = "";
  const io: CommandIo = {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    env,
  };
  return { io, out: () => out, err: () => err };
}

async function checkConfig(args: readonly string[], env: Record<string, string | undefined> = {}) {
  const c = captureIo(env);
  const code = await main("openai4s", ["check-config", ...args], c.io);
  return { code, out: c.out(), err: c.err() };
}

function writeConfig(text: string): string {
  const file = join(tempDir(), "cluster.toml");
  writeFileSync(file, text);
  return file;
}

const VALID = [
  "[cluster]",
  'account = "physics"',
  "[profiles.small]",
  'description = "A small slot"',
  "allow_batch = true",
  "[profiles.big]",
  'description = "Two nodes"',
  'partition = "debug"',
  "nodes = 2",
  "time_limit_minutes = 60",
  "allow_batch = true",
  "allow_sessions = true",
  "",
].join("\n");

describe("openai4s check-config FILE", () => {
  test("the example passes: exit 0, each profile's public fields, then what it maps to", async () => {
    const r = await checkConfig([EXAMPLE]);
    expect(r.code).toBe(0);
    // Its partition, QoS and account are placeholders: named, with the line and the way out.
    const warnings = r.err.trimEnd().split("\n");
    expect(warnings.every((w) => w.startsWith(`warning: ${EXAMPLE}:`))).toBe(true);
    for (const said of [
      'profile "gpu-interactive": partition "gpu" is a name from cluster.toml.example',
      'profile "gpu-interactive": qos "interactive" is a name from cluster.toml.example',
      'profile "gpu-interactive": account "physics" is a name from cluster.toml.example',
      'profile "cpu-batch": partition "debug"',
      'profile "default": account "physics"',
    ]) {
      expect(warnings.some((w) => w.includes(said))).toBe(true);
    }
    expect(r.err).toContain("check-config --preflight");
    expect(r.out).toStartWith(`${EXAMPLE}: 3 profiles\n`);
    for (const name of ["gpu-interactive", "cpu-batch", "default"]) {
      const at = r.out.indexOf(`\n${name}: `);
      expect(at).toBeGreaterThan(0);
      const block = r.out.slice(at + 1).split(/\n(?=\S)/)[0] ?? "";
      const order = ["kinds:", "resources:", "maps to:"].map((label) => block.indexOf(label));
      expect(order.every((i) => i > 0)).toBe(true);
      expect([...order].sort((a, b) => a - b)).toEqual(order);
    }
    expect(r.out).toContain("  maps to:   partition gpu, QoS interactive, account physics");
  });

  test("public fields read as the API's", async () => {
    const config = writeConfig(VALID);
    const r = await checkConfig([config]);
    expect(r.code).toBe(0);
    expect(r.out).toBe(
      [
        `${config}: 2 profiles`,
        "small: A small slot",
        "  kinds:     BATCH",
        "  resources: 1 node, 1 CPU per node, 0 GPUs per node, memory: the cluster's default, time limit: the cluster's default",
        "  maps to:   the cluster's default partition, no QoS given (the default), account physics (from [cluster])",
        "             sbatch --account=physics --nodes=1 --ntasks-per-node=1 --cpus-per-task=1",
        "big: Two nodes",
        "  kinds:     SESSION, BATCH",
        "  resources: 2 nodes, 1 CPU per node, 0 GPUs per node, memory: the cluster's default, time limit 60 min",
        "  maps to:   partition debug, no QoS given (the default), account physics (from [cluster])",
        "             sbatch --partition=debug --account=physics --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 --time=60",
        "",
      ].join("\n"),
    );
  });

  test.each([
    [
      "an unknown key",
      `${VALID}qos_name = "x"\n`,
      13,
      1,
      /unknown key "qos_name" in \[profiles\.big\]/,
    ],
    [
      "a float",
      VALID.replace("nodes = 2", "nodes = 2.0"),
      9,
      9,
      /profiles\.big\.nodes: 2\.0 is a float/,
    ],
    [
      "an array",
      VALID.replace("nodes = 2", "nodes = [1, 2]"),
      9,
      9,
      /profiles\.big\.nodes: arrays/,
    ],
    [
      "a bad escape",
      VALID.replace('"A small slot"', '"A \\e slot"'),
      4,
      18,
      /profiles\.small\.description: the escape \\e/,
    ],
    [
      "a wrong type",
      VALID.replace("nodes = 2", 'nodes = "2"'),
      9,
      1,
      /profiles\.big\.nodes must be an integer/,
    ],
  ])(
    "%s: exit 2 and FILE:LINE:COLUMN: message naming the key",
    async (_label, text, line, column, why) => {
      const file = writeConfig(text);
      const r = await checkConfig([file]);
      expect(r.code).toBe(2);
      expect(r.out).toBe("");
      expect(r.err.split("\n")).toHaveLength(2); // one line and its newline
      expect(r.err).toStartWith(`${file}:${line}:${column}: `);
      expect(r.err).toMatch(why);
    },
  );

  test("a problem without a column is FILE:LINE: message", async () => {
    const file = writeConfig("[cluster]\n");
    const r = await checkConfig([file]);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`${file}:1: no profile is defined: add a [profiles.NAME] table\n`);
  });

  test("an unreadable file: exit 2, FILE: why", async () => {
    const file = join(tempDir(), "missing.toml");
    const r = await checkConfig([file]);
    expect(r).toEqual({ code: 2, out: "", err: `${file}: cannot read it (ENOENT)\n` });
  });

  test.each([
    ["no FILE", [], /FILE is required/],
    ["two FILEs", ["a.toml", "b.toml"], /unexpected argument "b\.toml"/],
    ["an unknown option", ["--frobnicate", "a.toml"], /frobnicate/],
  ])("usage error (%s): exit 2", async (_label, args, why) => {
    const r = await checkConfig(args);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(why);
  });

  test("--help: exit 0", async () => {
    const r = await checkConfig(["--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("Usage: openai4s check-config FILE [--preflight]");
  });

  test("the check is the named backend's plugin's: one that takes no file is a usage error", async () => {
    expect((await checkConfig([writeConfig(VALID), "--backend", "slurm"])).code).toBe(0);
    const local = await checkConfig([writeConfig(VALID), "--backend", "local"]);
    expect(local.code).toBe(2);
    expect(local.err).toContain("the local backend takes no config file");
    const unknown = await checkConfig([writeConfig(VALID), "--backend", "pbs"]);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('--backend "pbs" is not one of local, slurm');
  });
});

describe("openai4s check-config FILE --preflight", () => {
  /**
   * A stand-in for the cluster's submit command on PATH: refuses the `debug` partition, accepts
   * anything else, and records every argv (one per line) so the test sees what was asked.
   */
  function fakeSubmitter(): { readonly path: string; readonly calls: () => string[] } {
    const dir = tempDir();
    const log = join(dir, "calls.log");
    const script = join(dir, "sbatch");
    writeFileSync(
      script,
      `#!/bin/sh
echo "$*" >> '${log}'
case " $* " in
  *" --partition=debug "*) echo "sbatch: error: invalid partition specified: debug" >&2; exit 1 ;;
esac
echo "sbatch: Job 7 to start at 2026-01-01T00:00:00 using 1 processors on nodes n1 in partition x" >&2
exit 0
`,
    );
    chmodSync(script, 0o755);
    return {
      path: dir,
      calls: () => {
        try {
          return readFileSync(log, "utf8").trim().split("\n");
        } catch {
          return [];
        }
      },
    };
  }

  test("an impossible profile: exit 1, the verdicts beside the profiles", async () => {
    const fake = fakeSubmitter();
    const r = await checkConfig([writeConfig(VALID), "--preflight"], { PATH: fake.path });
    expect(r.code).toBe(1);
    expect(r.out).toContain("  preflight: POSSIBLE: sbatch: Job 7 to start");
    expect(r.out).toContain(
      "  preflight: IMPOSSIBLE: sbatch: error: invalid partition specified: debug",
    );
    expect(r.err).toContain("big IMPOSSIBLE");
    const calls = fake.calls();
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call).toContain("--test-only");
      expect(call).not.toContain("--parsable");
      expect(call).toEndWith("--wrap=true");
    }
  });

  test("every profile possible: exit 0", async () => {
    const fake = fakeSubmitter();
    const r = await checkConfig(
      [writeConfig(VALID.replace('partition = "debug"\n', "")), "--preflight"],
      {
        PATH: fake.path,
      },
    );
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(fake.calls()).toHaveLength(2);
  });

  test("no submit command on PATH: exit 1, UNANSWERED, never IMPOSSIBLE", async () => {
    const r = await checkConfig([writeConfig(VALID), "--preflight"], { PATH: tempDir() });
    expect(r.code).toBe(1);
    expect(r.out).toContain("preflight: UNANSWERED");
    expect(r.out).not.toContain("IMPOSSIBLE");
  });

  test("an invalid file is refused before anything is asked", async () => {
    const fake = fakeSubmitter();
    const r = await checkConfig([writeConfig(`${VALID}bogus = 1\n`), "--preflight"], {
      PATH: fake.path,
    });
    expect(r.code).toBe(2);
    expect(fake.calls()).toEqual([]);
  });

  const clusterDir = process.env["OPENAI4S_SLURM_TEST_DIR"];
  test.skipIf(clusterDir === undefined)(
    "against the real test cluster: the example's gpu partition does not exist there",
    async () => {
      const envFile = readFileSync(join(clusterDir as string, "env"), "utf8");
      const slurmConf = /export SLURM_CONF=(\S+)/.exec(envFile)?.[1];
      const env = { PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin", SLURM_CONF: slurmConf };
      // The cluster is shared: another suite may be restarting its controller right now, and
      // a controller that is coming back answers "not available" for a while. Poll.
      let r = await checkConfig([EXAMPLE, "--preflight"], env);
      const bothPossible = async () => {
        r = await checkConfig([EXAMPLE, "--preflight"], env);
        return (r.out.match(/preflight: POSSIBLE/g) ?? []).length >= 2;
      };
      // The assertions below on the last answer say more than a timeout would.
      await eventually(bothPossible, { timeoutMs: 60_000, intervalMs: 1_000 }).catch(() => {});
      expect(r.code).toBe(1);
      expect(r.out).toMatch(
        /gpu-interactive: [^\n]*\n(?: {2}[^\n]*\n)*? {2}preflight: IMPOSSIBLE: [^\n]*invalid partition/,
      );
      expect(r.out).toMatch(/cpu-batch: [^\n]*\n(?: {2}[^\n]*\n)*? {2}preflight: POSSIBLE: /);
      expect(r.out).toMatch(/default: [^\n]*\n(?: {2}[^\n]*\n)*? {2}preflight: POSSIBLE: /);
    },
    90_000,
  );
});
