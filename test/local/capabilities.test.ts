/**
 * The optional capabilities of the local backend with real processes: steps inside a live
 * allocation (TaskRunner) and the sandbox seam (every launch wrapped; session isolation
 * declared only when a sandbox is given, and only as what the sandbox itself verifies).
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createLocalBackend } from "../../src/adapters/backend-local/backend.ts";
import { defaultLocalProfiles } from "../../src/adapters/backend-local/backend-options.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { sessionIsolationVerdict } from "../../src/core/ports/allocation-backend.ts";
import type { LaunchReach, Sandbox, SandboxPaths } from "../../src/core/sandbox.ts";
import {
  backendOptions,
  cleanUpStates,
  makeBackend,
  makeRequest,
  makeState,
  targetOf,
  waitForPhase,
} from "../support/local-backend.ts";

// Real processes on a machine other suites load too: generous, and the waits inside are
// bounded by their own deadlines.
setDefaultTimeout(60_000);

afterEach(() => {
  cleanUpStates();
});

describe("local backend: tasks in a live allocation", () => {
  test("a task runs in the allocation's workspace with its environment", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["sleep", "300"]);
    await backend.submit([request]);
    await waitForPhase(backend, request, ["RUNNING"]);
    const result = await backend.capabilities.tasks.runTask(
      targetOf(request),
      ["sh", "-c", "pwd; echo $OPENAI4S_ALLOCATION_ID; echo e >&2; exit 4"],
      { timeoutMs: 5_000 },
    );
    expect(result).toEqual({
      kind: "Completed",
      exitCode: 4,
      stdout: `${request.workspaceDir}\n${request.allocationId}\n`,
      stderr: "e\n",
    });
  });

  test("a task sees its allocation's OPENAI4S_DEADLINE; without a limit, none", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const limited = makeRequest(state, ["sleep", "300"], { timeLimitSeconds: 600 });
    const unlimited = makeRequest(state, ["sleep", "300"]);
    await backend.submit([limited, unlimited]);
    const running = await waitForPhase(backend, limited, ["RUNNING"]);
    await waitForPhase(backend, unlimited, ["RUNNING"]);
    const deadlineAt = running.kind === "Observed" ? running.deadlineAt : undefined;
    if (deadlineAt === undefined || deadlineAt === null) throw new Error("no deadline observed");
    const print = ["sh", "-c", `echo "d=\${OPENAI4S_DEADLINE-unset}"`];
    expect(
      await backend.capabilities.tasks.runTask(targetOf(limited), print, { timeoutMs: 5_000 }),
    ).toEqual({
      kind: "Completed",
      exitCode: 0,
      stdout: `d=${Math.floor(deadlineAt / 1000)}\n`,
      stderr: "",
    });
    expect(
      await backend.capabilities.tasks.runTask(targetOf(unlimited), print, { timeoutMs: 5_000 }),
    ).toMatchObject({
      stdout: "d=unset\n",
    });
  });

  test("a task past its timeout is killed with its whole group", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["sleep", "300"]);
    await backend.submit([request]);
    await waitForPhase(backend, request, ["RUNNING"]);
    const started = Date.now();
    // The background sleep keeps stdout open: only a group kill lets the read finish.
    const result = await backend.capabilities.tasks.runTask(
      targetOf(request),
      ["sh", "-c", "sleep 30 & echo started; sleep 30"],
      { timeoutMs: 300 },
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(result).toMatchObject({ kind: "Completed", exitCode: 137, stdout: "started\n" });
    if (result.kind === "Completed") expect(result.stderr).toContain("timeout of 300 ms");
  });

  test("task output is capped per stream", async () => {
    const state = makeState();
    const backend = makeBackend(state, { taskOutputCapBytes: 1_000 });
    const request = makeRequest(state, ["sleep", "300"]);
    await backend.submit([request]);
    await waitForPhase(backend, request, ["RUNNING"]);
    const result = await backend.capabilities.tasks.runTask(
      targetOf(request),
      ["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a"],
      { timeoutMs: 5_000 },
    );
    expect(result.kind).toBe("Completed");
    if (result.kind !== "Completed") return;
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe("a".repeat(1_000));
    expect(result.stderr).toContain("stdout truncated at 1000 bytes");
  });

  test("no live allocation: Refused, and nothing new is started", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const finished = makeRequest(state, ["true"]);
    await backend.submit([finished]);
    await waitForPhase(backend, finished, ["COMPLETED"]);
    const unknown = makeRequest(state, ["true"]);
    const calls = { ...(await backend.diagnostics()).calls };
    for (const target of [targetOf(finished), targetOf(unknown)]) {
      const result = await backend.capabilities.tasks.runTask(target, ["true"], {
        timeoutMs: 1_000,
      });
      expect(result.kind).toBe("Refused");
    }
    const after = (await backend.diagnostics()).calls;
    expect(after["spawnSupervisor"]).toBe(calls["spawnSupervisor"]);
    expect(after["submit"]).toBe(calls["submit"]);
    expect(after["runTask"]).toBeUndefined();
  });
});

function envPrefixSandbox(seen: SandboxPaths[], verified = true): Sandbox {
  return {
    mechanism: "env-prefix (test)",
    sandboxed: true,
    identities: fixedIdentities(null),
    wrap(argv, paths, env) {
      seen.push(paths);
      const vars = Object.entries(env.vars).map(([k, v]) => `${k}=${v}`);
      return ["/usr/bin/env", "-i", ...vars, "SANDBOXED=1", ...argv];
    },
    prepare: () => null,
    async verify() {
      return verified
        ? { kind: "Verified", mechanism: "env-prefix (test)" }
        : { kind: "Unverified", message: "probe saw the canary" };
    },
  };
}

describe("local backend: the sandbox seam", () => {
  test("with a sandbox every launch is wrapped and isolation is what the sandbox verifies", async () => {
    const state = makeState();
    const seen: SandboxPaths[] = [];
    const backend = createLocalBackend({
      ...backendOptions(state),
      sandbox: envPrefixSandbox(seen),
    });
    expect(backend.capabilities.sessionIsolation).not.toBeNull();
    expect(await backend.capabilities.sessionIsolation.verifySessionIsolation()).toEqual({
      kind: "Verified",
      mechanism: "env-prefix (test)",
    });

    const out = join(state.root, "batch.txt");
    const batch = makeRequest(state, ["sh", "-c", `echo "$SANDBOXED" > ${out}`]);
    await backend.submit([batch]);
    await waitForPhase(backend, batch, ["COMPLETED"]);
    expect(readFileSync(out, "utf8")).toBe("1\n");
    // The allocation directory (logs, records the daemon reads) is never exposed.
    expect(seen[0]?.writable).toEqual([batch.workspaceDir]);

    const unverified = createLocalBackend({
      ...backendOptions(state),
      sandbox: envPrefixSandbox([], false),
    });
    expect((await sessionIsolationVerdict(unverified)).kind).toBe("Unverified");
  });

  test("a worker launch gets --rank-env, rank 0, and its credential directory read-only", async () => {
    const state = makeState();
    const seen: SandboxPaths[] = [];
    const backend = createLocalBackend({
      ...backendOptions(state),
      sandbox: envPrefixSandbox(seen),
    });
    const out = join(state.root, "worker.txt");
    const credentialDir = join(state.root, "creds");
    const worker = makeRequest(state, [], {
      workloadKind: "SESSION",
      launch: {
        kind: "WORKER",
        workerCommand: ["/bin/sh", "-c", `echo "$@" "$OPENAI4S_RANK" "$SANDBOXED" > ${out}`, "w"],
        credentialDir,
        ranks: 1,
        env: {},
      },
    });
    const results = await backend.submit([worker]);
    expect(results.get(worker.token)?.kind).toBe("Created");
    await waitForPhase(backend, worker, ["COMPLETED"]);
    expect(readFileSync(out, "utf8")).toBe("--rank-env OPENAI4S_RANK 0 1\n");
    expect(seen[0]?.readOnly).toContain(credentialDir);

    const twoNodes = makeRequest(state, [], {
      workloadKind: "SESSION",
      launch: { kind: "WORKER", workerCommand: ["/bin/true"], credentialDir, ranks: 2, env: {} },
    });
    expect((await backend.submit([twoNodes])).get(twoNodes.token)?.kind).toBe("Rejected");
  });

  test("tasks run inside the sandbox too", async () => {
    const state = makeState();
    const backend = createLocalBackend({
      ...backendOptions(state),
      sandbox: envPrefixSandbox([]),
    });
    const request = makeRequest(state, ["sleep", "300"]);
    await backend.submit([request]);
    await waitForPhase(backend, request, ["RUNNING"]);
    const result = await backend.capabilities.tasks.runTask(
      targetOf(request),
      ["sh", "-c", 'echo "$SANDBOXED"'],
      {
        timeoutMs: 5_000,
      },
    );
    expect(result).toMatchObject({ kind: "Completed", exitCode: 0, stdout: "1\n" });
  });

  test("a task gets its allocation's network: none stays none", async () => {
    const state = makeState();
    const reaches: (LaunchReach | undefined)[] = [];
    const sandbox = envPrefixSandbox([]);
    const [base] = defaultLocalProfiles();
    if (base === undefined) throw new Error("no default profile");
    const backend = createLocalBackend({
      ...backendOptions(state),
      profiles: [{ ...base, network: "none" }],
      sandbox: {
        ...sandbox,
        wrap(argv, paths, env, runAs, reach) {
          reaches.push(reach);
          return sandbox.wrap(argv, paths, env, runAs, reach);
        },
      },
    });
    const request = makeRequest(state, ["sleep", "300"]);
    await backend.submit([request]);
    await waitForPhase(backend, request, ["RUNNING"]);
    const result = await backend.capabilities.tasks.runTask(targetOf(request), ["true"], {
      timeoutMs: 5_000,
    });
    expect(result).toMatchObject({ kind: "Completed", exitCode: 0 });
    // The job's launch, then the step's: a step run with the host's network would reach
    // every loopback service the job was kept from.
    expect(reaches).toEqual([{ network: "none" }, { network: "none" }]);
  });
});
