/**
 * How a multi-task BATCH launch is wrapped and submitted, without a cluster: the sandbox binds
 * the node's shared directory (a placeholder the task launcher replaces) instead of a private
 * tmpfs, each task inherits only the backend's per-task allowlist, the node directory's owner
 * is the job's identity, and sbatch is asked for the tasks instead of one per node.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sbatchArgv } from "../../src/adapters/backend-slurm/broker-argv.ts";
import { bubblewrapArgv } from "../../src/adapters/isolation-bwrap/bubblewrap.ts";
import { wrappedBackend } from "../../src/adapters/isolation-bwrap/through-backend.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { type ExternalHandle, mintSubmissionToken } from "../../src/core/models.ts";
import type { Launch, SubmitRequest } from "../../src/core/ports/allocation-backend.ts";
import {
  type JobEnv,
  type LaunchWrapper,
  NODE_TMP_PLACEHOLDER,
  type SandboxPaths,
} from "../../src/core/sandbox.ts";
import { fakeBackend } from "../support/fake-backend.ts";
import { tempDirs } from "../support/temp-dir.ts";

const config = { bwrap: "/usr/bin/bwrap", maskedRoots: [], readOnlyExtra: [], runAs: null };
const paths: SandboxPaths = { writable: ["/spool/w/workspace"], readOnly: [] };

describe("the sandbox of a task", () => {
  test("binds the node's shared tmp/ and shm/ instead of private tmpfs mounts", () => {
    const argv = bubblewrapArgv(config, ["/bin/true"], { ...paths, nodeTmp: "/n/d" }, { vars: {} });
    const text = argv.join(" ");
    expect(text).toContain("--bind /n/d/shm /dev/shm --bind /n/d/tmp /tmp");
    expect(text).not.toContain("--tmpfs /tmp");
    expect(text).not.toContain("--tmpfs /dev/shm");
  });

  test("a single launch keeps its private tmpfs mounts", () => {
    const argv = bubblewrapArgv(config, ["/bin/true"], paths, { vars: {} }).join(" ");
    expect(argv).toContain("--perms 1777 --tmpfs /dev/shm --perms 1777 --tmpfs /tmp");
    expect(argv).not.toContain("--bind /n");
  });
});

describe("a multi-task launch through the wrapped backend", () => {
  const tempDir = tempDirs("o4s-multi-task-");

  async function submitted(launch: Launch): Promise<{ request: SubmitRequest; env: JobEnv[] }> {
    const root = tempDir();
    const seen: SubmitRequest[] = [];
    const inner = fakeBackend({
      submit: async (requests) => {
        seen.push(...requests);
        return new Map(
          requests.map((r) => [
            r.token,
            { kind: "Created", token: r.token, handle: r.token as unknown as ExternalHandle },
          ]),
        );
      },
    });
    const env: JobEnv[] = [];
    const recorded: SandboxPaths[] = [];
    const wrapper: LaunchWrapper = {
      sandboxed: true,
      identities: fixedIdentities(null),
      wrap(argv, p, e) {
        env.push(e);
        recorded.push(p);
        return [`nodeTmp=${p.nodeTmp ?? "none"}`, ...argv];
      },
      prepare: () => ({ uid: 61000, gid: 61001, label: "lease" }),
    };
    const wrapped = wrappedBackend(inner, {
      wrapper,
      rankEnv: "SLURM_PROCID",
      taskEnv: ["SLURM_PROCID", "PMI_FD"],
      launchEnv: ["OPENAI4S_DEADLINE"],
      baseEnv: { PATH: "/usr/bin" },
      locate: () => null,
      spoolDir: root,
    });
    await wrapped.submit([
      {
        allocationId: "a",
        workloadId: "w",
        workloadKind: "BATCH",
        token: mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n))),
        epoch: 1,
        profile: "mpi",
        name: "w",
        launch,
        timeLimitSeconds: null,
        allocationDir: join(root, "a"),
        workspaceDir: join(root, "w"),
      },
    ]);
    const request = seen[0];
    if (request === undefined) throw new Error("nothing submitted");
    return { request, env };
  }

  test("the allowlist is inherited, the node dir is the placeholder, the owner the job's", async () => {
    const { request, env } = await submitted({
      kind: "COMMAND",
      command: ["/bin/hello"],
      env: { X: "1", SLURM_PROCID: "5" },
      tasks: { count: 2, perNode: null },
    });
    expect(env[0]?.inherit).toEqual(["SLURM_PROCID", "PMI_FD", "OPENAI4S_DEADLINE"]);
    expect(env[0]?.vars["X"]).toBe("1");
    // The launcher's rank, not the request's: a fixed value would win over an inherited one.
    expect(env[0]?.vars["SLURM_PROCID"]).toBeUndefined();
    const launch = request.launch;
    expect(launch.kind === "COMMAND" && launch.command[0]).toBe(`nodeTmp=${NODE_TMP_PLACEHOLDER}`);
    expect(launch.kind === "COMMAND" && launch.tasks).toEqual({
      count: 2,
      perNode: null,
      owner: { uid: 61000, gid: 61001 },
    });
    expect(launch.env).toEqual({});
  });

  test("a single-task COMMAND inherits no launcher variable and keeps its private /tmp", async () => {
    const { request, env } = await submitted({ kind: "COMMAND", command: ["/bin/x"], env: {} });
    expect(env[0]?.inherit).toEqual(["OPENAI4S_DEADLINE"]);
    const launch = request.launch;
    expect(launch.kind === "COMMAND" && launch.command[0]).toBe("nodeTmp=none");
    expect(launch.kind === "COMMAND" && launch.tasks).toBeUndefined();
  });
});

describe("sbatch for a multi-task BATCH", () => {
  const spec = {
    jobName: "o4s-x",
    comment: "o4s-x",
    scriptPath: "/s/job.sh",
    workDir: "/s",
    stdoutPath: "/s/o",
    stderrPath: "/s/e",
    partition: null,
    qos: null,
    account: null,
    nodes: 2,
    cpusPerTask: 1,
    gpusPerNode: 0,
    memoryMb: null,
    timeLimitMinutes: null,
    env: {},
  };

  test("asks for the tasks (and per node when given), not one task per node", () => {
    const argv = (s: Parameters<typeof sbatchArgv>[0]) => {
      const r = sbatchArgv(s);
      return r.kind === "Valid" ? r.argv : [r.message];
    };
    expect(argv(spec)).toContain("--ntasks-per-node=1");
    const tasks = argv({ ...spec, tasks: { count: 4, perNode: 2 } });
    expect(tasks).toContain("--ntasks=4");
    expect(tasks).toContain("--ntasks-per-node=2");
    expect(tasks).not.toContain("--ntasks-per-node=1");
    const spread = argv({ ...spec, tasks: { count: 3, perNode: null } });
    expect(spread.filter((a) => a.startsWith("--ntasks"))).toEqual(["--ntasks=3"]);
    expect(sbatchArgv({ ...spec, tasks: { count: 0, perNode: null } }).kind).toBe("Invalid");
  });
});
