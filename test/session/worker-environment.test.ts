/**
 * The worker's check of a session's environment on its node (environment-check.ts): what it
 * finds missing or failing, in the words the session's end will carry, and, end to end from
 * source against a real gateway, that a worker whose environment cannot run reports it (no
 * kernel started) and exits 1. Real files, real bash, real processes.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import {
  type CheckedEnvironment,
  environmentProblem,
  missingPath,
} from "../../src/apps/worker/environment-check.ts";
import { systemClock, systemTimers } from "../../src/lib/clock.ts";
import { mintCredentials } from "../../src/wire/credential.ts";
import { type Harness, realPython, startHarness } from "../support/gateway-harness.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-worker-env-");

/** A prefix with bin/python (the real interpreter) and bin/marker-tool, as a venv has. */
function prefixDir(): string {
  const prefix = join(tempDir(), "env");
  mkdirSync(join(prefix, "bin"), { recursive: true });
  symlinkSync(realPython(), join(prefix, "bin", "python"));
  writeFileSync(join(prefix, "bin", "marker-tool"), "#!/bin/sh\necho marker\n");
  chmodSync(join(prefix, "bin", "marker-tool"), 0o755);
  return prefix;
}

function environment(prefix: string | null, over: Partial<CheckedEnvironment> = {}) {
  return {
    name: "torch",
    python: prefix === null ? realPython() : `${prefix}/bin/python`,
    prefix,
    setupLines: [],
    ...over,
  } satisfies CheckedEnvironment;
}

describe("the paths an environment names", () => {
  test("a prefix not on the node is named, with the node", () => {
    const gone = join(tempDir(), "no-such-env");
    expect(missingPath(environment(gone), "n7")).toBe(
      `environment "torch": ${gone} is not on node n7`,
    );
  });

  test("a prefix that is a file, not a directory, is not there", () => {
    const file = join(tempDir(), "a-file");
    writeFileSync(file, "");
    expect(missingPath(environment(file), "n7")).toBe(
      `environment "torch": ${file} is not on node n7`,
    );
  });

  test("an interpreter not there, or not executable, is named", () => {
    const prefix = prefixDir();
    const missing = `${prefix}/bin/python3.99`;
    expect(missingPath(environment(prefix, { python: missing }), "n7")).toBe(
      `environment "torch": ${missing} is not on node n7`,
    );
    const plain = join(prefix, "bin", "not-executable");
    writeFileSync(plain, "");
    chmodSync(plain, 0o644);
    expect(missingPath(environment(null, { python: plain }), "n7")).toBe(
      `environment "torch": ${plain} is not executable on node n7`,
    );
  });

  test("an environment that is all there passes, with or without a prefix", async () => {
    expect(missingPath(environment(prefixDir()), "n7")).toBeNull();
    expect(await environmentProblem(environment(null), "n7", { timers: systemTimers })).toBeNull();
  });
});

describe("the module lines an environment runs", () => {
  test("the line that fails is named, with its status, its first words and the node", async () => {
    const problem = await environmentProblem(
      environment(prefixDir(), {
        setupLines: ["true", "echo 'no module called cuda/99' >&2; exit 3", "echo never"],
      }),
      "n7",
      { timers: systemTimers },
    );
    expect(problem).toBe(
      `environment "torch": module line "echo 'no module called cuda/99' >&2; exit 3" failed (exit 3) on node n7: no module called cuda/99`,
    );
  });

  test("under set -e, as the kernel's start runs them: a failing command mid-line stops them", async () => {
    const problem = await environmentProblem(
      environment(prefixDir(), { setupLines: ["export A=1", "false", "true"] }),
      "n7",
      { timers: systemTimers },
    );
    expect(problem).toBe(`environment "torch": module line "false" failed (exit 1) on node n7`);
  });

  test("they run with the prefix's bin first on PATH; lines that succeed pass", async () => {
    const prefix = prefixDir();
    const lines = ['[ "$(command -v marker-tool)" = "$VIRTUAL_ENV/bin/marker-tool" ]', "echo ok"];
    expect(
      await environmentProblem(environment(prefix, { setupLines: lines }), "n7", {
        timers: systemTimers,
      }),
    ).toBeNull();
  });

  test("a missing prefix is reported before any line runs", async () => {
    const gone = join(tempDir(), "gone");
    const mark = join(tempDir(), "ran");
    const problem = await environmentProblem(
      environment(gone, { setupLines: [`touch ${mark}`] }),
      "n7",
      { timers: systemTimers },
    );
    expect(problem).toBe(`environment "torch": ${gone} is not on node n7`);
    expect(await Bun.file(mark).exists()).toBe(false);
  });

  test("lines that hang are stopped at the bound and said to", async () => {
    const problem = await environmentProblem(
      environment(prefixDir(), { setupLines: ["exec sleep 60"] }),
      "n7",
      { timeoutMs: 300, timers: systemTimers },
    );
    expect(problem).toBe(
      `environment "torch": its module lines did not finish within 300 ms on node n7`,
    );
  });
});

const ROOT = resolve(import.meta.dir, "../..");
const BUN = join(ROOT, "node_modules/.bin/bun");
const MAIN = join(ROOT, "src/main.ts");

const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.close();
});

/** A gateway expecting one worker of alloc-e, epoch 2, and that worker's credential dir. */
function gatewayFor(): { h: Harness; credentialDir: string } {
  const h = startHarness(systemClock, { heartbeatIntervalMs: 200 });
  harnesses.push(h);
  h.expectations.set("alloc-e", { epoch: 2, ranks: 1, fenced: false });
  const credentialDir = join(h.dir, "allocations", "alloc-e", "credentials");
  mintCredentials({
    key: h.key,
    allocationId: "alloc-e",
    epoch: 2,
    ranks: 1,
    ttlMs: 60_000,
    clock: systemClock,
    random: randomBytes,
    gatewayAddress: h.gateway.address,
    credentialDir,
  });
  return { h, credentialDir };
}

async function runWorker(credentialDir: string, args: readonly string[]) {
  const p = Bun.spawn(
    [
      BUN,
      MAIN,
      "worker",
      "--credential-dir",
      credentialDir,
      "--rank-env",
      "O4S_TEST_RANK",
      "--node-env",
      "O4S_TEST_NODE",
      ...args,
    ],
    {
      env: { ...process.env, O4S_TEST_RANK: "0", O4S_TEST_NODE: "node-7" },
      cwd: ROOT,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  const [code, stderr] = await Promise.all([p.exited, new Response(p.stderr).text()]);
  return { code, stderr };
}

describe("a worker whose environment cannot run on its node", () => {
  test("reports the missing prefix to the gateway, starts no kernel, and exits 1", async () => {
    const { h, credentialDir } = gatewayFor();
    const gone = join(tempDir(), "no-such-env");
    const r = await runWorker(credentialDir, [
      "--environment-name",
      "gone",
      "--python",
      `${gone}/bin/python`,
      "--environment-prefix",
      gone,
    ]);
    expect(r.code).toBe(1);
    const message = `environment "gone": ${gone} is not on node node-7`;
    // In the job's log too, for the admin (a JSON log line).
    expect(r.stderr).toContain(JSON.stringify(`worker: ${message}`));
    // Reported before the worker exited: the gateway's answer is what it waited for.
    const kinds = h.events.map((e) => e.kind);
    expect(kinds.slice(0, 2)).toEqual(["WorkerConnected", "EnvironmentUnavailable"]);
    expect(kinds).not.toContain("KernelStatus");
    expect(h.events.find((e) => e.kind === "EnvironmentUnavailable")).toEqual({
      kind: "EnvironmentUnavailable",
      allocationId: "alloc-e",
      epoch: 2,
      rank: 0,
      message,
    });
  }, 30_000);

  test("reports a module line that fails, naming it", async () => {
    const { h, credentialDir } = gatewayFor();
    const prefix = prefixDir();
    const r = await runWorker(credentialDir, [
      "--environment-name",
      "broken",
      "--python",
      `${prefix}/bin/python`,
      "--environment-prefix",
      prefix,
      "--kernel-setup",
      "exit 4",
    ]);
    expect(r.code).toBe(1);
    const reported = h.events.find((e) => e.kind === "EnvironmentUnavailable");
    expect(reported).toMatchObject({
      message: 'environment "broken": module line "exit 4" failed (exit 4) on node node-7',
    });
    expect(h.events.some((e) => e.kind === "KernelStatus")).toBe(false);
  }, 30_000);
});
