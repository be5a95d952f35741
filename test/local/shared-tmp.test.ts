/**
 * The allocation's own /tmp and /dev/shm on the local backend: the job and the steps run
 * beside it (`POST /v1/workloads/{id}/tasks`) share them, another allocation does not see
 * them, and they are emptied when the job ends, following no link the job planted there.
 * Through the built binary, with a root daemon (jobs under leased uids) and an unprivileged
 * one (jobs in a user namespace); the record's half is pure. Seen failing with each launch
 * given its own tmpfs (the step found no file), and with a removal that follows links.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chownSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildJobRecord, sharedTmpDir } from "../../src/adapters/backend-local/launch.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import type { ResourceProfile } from "../../src/core/models.ts";
import type { SubmitRequest } from "../../src/core/ports/allocation-backend.ts";
import type { LaunchWrapper, SandboxPaths } from "../../src/core/sandbox.ts";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 90_000;
const DAEMON_UID = 4243;

const PROFILE: ResourceProfile = {
  name: "p",
  description: "p",
  kinds: ["BATCH"],
  resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: 512, timeLimitSeconds: null },
};

const REQUEST = {
  token: "o4s-abcdefghijklmnopqrstuvwxyz",
  workloadId: "w1",
  allocationId: "a1",
  epoch: 1,
  workloadKind: "BATCH",
  profile: "p",
  timeLimitSeconds: null,
  allocationDir: "/spool/workloads/w1/allocations/a1",
  workspaceDir: "/spool/workloads/w1/workspace",
  launch: { kind: "COMMAND", command: ["python3"], env: {} },
} as unknown as SubmitRequest;

function recordWith(sandboxed: boolean) {
  const seen: SandboxPaths[] = [];
  const wrapper: LaunchWrapper = {
    sandboxed,
    identities: fixedIdentities(null),
    wrap(argv, paths) {
      seen.push(paths);
      return argv;
    },
    prepare: () => null,
  };
  const context = {
    wrapper,
    baseEnv: {},
    profiles: [PROFILE],
    killGraceMs: 0,
    sandboxReadOnly: [],
    now: 0,
    limits: { kind: "None" as const, why: "test" },
  };
  return { record: buildJobRecord(REQUEST, context, null), paths: seen[0] };
}

describe("the record names the allocation's /tmp and /dev/shm", () => {
  test("sandboxed: the allocation directory's node-tmp, on the launch and for its steps", () => {
    const { record, paths } = recordWith(true);
    const shared = sharedTmpDir(REQUEST.allocationDir);
    expect(shared).toBe("/spool/workloads/w1/allocations/a1/node-tmp");
    expect(paths?.nodeTmp).toBe(shared);
    expect(record.sharedTmpDir).toBe(shared);
    // Bound as /tmp and /dev/shm only: never writable or readable as a directory of its own.
    expect([...(paths?.writable ?? []), ...(paths?.readOnly ?? [])]).not.toContain(shared);
  });

  test("without a sandbox: nothing (the job uses the host's /tmp like any process)", () => {
    const { record, paths } = recordWith(false);
    expect(paths?.nodeTmp).toBeUndefined();
    expect(record.sharedTmpDir).toBeUndefined();
  });
});

type TaskAnswer = { readonly exitCode: number; readonly stdout: string; readonly stderr: string };

async function task(d: Daemon, id: string, command: readonly string[]): Promise<TaskAnswer> {
  const response = await fetch(`http://localhost/v1/workloads/${id}/tasks`, {
    unix: d.socket,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ command, timeoutSeconds: 30 }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`task failed (${response.status}): ${text}`);
  return JSON.parse(text) as TaskAnswer;
}

function idOf(stdout: string): string {
  return stdout.trim().split(/\s+/).at(-1) ?? "";
}

async function submit(d: Daemon, script: string): Promise<string> {
  const r = await d.cli("submit", "--", "/bin/sh", "-c", script);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  return idOf(r.stdout);
}

function sharedTmpOf(d: Daemon, workloadId: string, allocationId: string): string {
  const spool = `${d.stateDir}-spool`;
  return sharedTmpDir(join(spool, "workloads", workloadId, "allocations", allocationId));
}

/** The job's script: leaves a file in each, then stays until cancelled. */
const JOB = "echo from-the-job > /tmp/x && echo in-shm > /dev/shm/y && sleep 600";
/** What another allocation finds (nothing of the first job's). */
const LOOK = "ls -A /tmp /dev/shm; cat /tmp/x /dev/shm/y 2>&1; true";

function sharedTmpSuite(
  where: string,
  start: () => Promise<Daemon>,
  /** Who owns the host canary: the daemon's uid, or a removal by it could not fail the test. */
  canaryOwner: number,
): void {
  describe(`${where}: a job and its steps share /tmp and /dev/shm`, () => {
    let d: Daemon;
    let job = "";
    let shared = "";

    beforeAll(async () => {
      ensureBuilt();
      d = await start();
      job = await submit(d, JOB);
      // A job that never runs says why: its phase and reason, and the daemon's log (a CI run
      // once timed out here with nothing but "last: false" to go on).
      try {
        await eventually(
          async () => {
            const view = await d.show(job);
            if (view.phase === "RUNNING") return true;
            throw new Error(`${view.phase} (${view.reason ?? "no reason"})`);
          },
          { what: `${job} RUNNING`, timeoutMs: 60_000 },
        );
      } catch (error) {
        throw new Error(`${String(error)}\n${d.log()}`);
      }
      const allocation = (await d.show(job)).allocations[0]?.id ?? "none";
      shared = sharedTmpOf(d, job, allocation);
      await eventually(() => existsSync(join(shared, "shm", "y")), {
        what: "the job's files in its /tmp and /dev/shm",
        timeoutMs: 30_000,
      });
    }, 120_000);

    afterAll(async () => {
      if (job !== "") await d?.cli("cancel", job);
      await d?.stop();
    }, 60_000);

    test(
      "a step reads what the job left in /tmp and /dev/shm",
      async () => {
        const r = await task(d, job, ["cat", "/tmp/x", "/dev/shm/y"]);
        expect(r).toEqual({ exitCode: 0, stdout: "from-the-job\nin-shm\n", stderr: "" });
        // Owned by the job's identity, where its workspace is.
        const workspace = join(`${d.stateDir}-spool`, "workloads", job, "workspace");
        expect(statSync(join(shared, "tmp")).uid).toBe(statSync(workspace).uid);
        expect(statSync(join(shared, "tmp")).mode & 0o777).toBe(0o700);
      },
      TIMEOUT_MS,
    );

    test(
      "another allocation sees neither, nor do its steps",
      async () => {
        const other = await submit(d, `${LOOK}; sleep 600`);
        await eventually(async () => (await d.show(other)).phase === "RUNNING", {
          what: `${other} RUNNING`,
          timeoutMs: 60_000,
        });
        const step = await task(d, other, ["/bin/sh", "-c", LOOK]);
        expect(step.stdout).not.toContain("from-the-job");
        expect(step.stdout).not.toContain("in-shm");
        expect(step.stdout).toContain("No such file");
        await d.cli("cancel", other);
        await d.cli("wait", other, "--timeout", "30s");
        const view = await d.show(other);
        const allocation = view.allocations[0]?.id ?? "none";
        const logs = join(`${d.stateDir}-spool`, "workloads", other, "allocations", allocation);
        const out = readFileSync(join(logs, "stdout.log"), "utf8");
        expect(out).not.toContain("from-the-job");
        expect(out).toContain("No such file");
      },
      TIMEOUT_MS,
    );

    test(
      "emptying them follows no link the job planted there",
      async () => {
        // A host directory the job cannot see, named by links it leaves in /tmp and /dev/shm:
        // a removal that followed them would delete the host's files as root.
        const canary = makeTempDir("o4s-shared-tmp-canary-");
        try {
          mkdirSync(join(canary, "sub"));
          writeFileSync(join(canary, "keep"), "host file");
          writeFileSync(join(canary, "sub", "keep"), "host file");
          for (const p of [
            canary,
            join(canary, "sub"),
            join(canary, "keep"),
            join(canary, "sub", "keep"),
          ]) {
            chownSync(p, canaryOwner, canaryOwner);
          }
          const plant = [
            `ln -s ${canary} /tmp/dir-link`,
            `ln -s ${canary}/keep /tmp/file-link`,
            "mkdir -p /tmp/nested/deeper",
            `ln -s ${canary}/sub /tmp/nested/deeper/link`,
            `ln -s ${canary} /dev/shm/dir-link`,
          ].join(" && ");
          const planter = await submit(d, plant);
          await d.cli("wait", planter, "--timeout", "30s");
          const view = await d.show(planter);
          expect(view.phase).toBe("COMPLETED");
          const planted = sharedTmpOf(d, planter, view.allocations[0]?.id ?? "none");
          await eventually(() => !existsSync(planted), {
            what: `${planted} removed`,
            timeoutMs: 30_000,
          });
          expect(readFileSync(join(canary, "keep"), "utf8")).toBe("host file");
          expect(readFileSync(join(canary, "sub", "keep"), "utf8")).toBe("host file");
        } finally {
          removeDir(canary);
        }
      },
      TIMEOUT_MS,
    );

    test(
      "they are emptied when the job ends",
      async () => {
        await d.cli("cancel", job);
        await d.cli("wait", job, "--timeout", "30s");
        await eventually(() => !existsSync(shared), {
          what: `${shared} removed`,
          timeoutMs: 30_000,
        });
        job = "";
      },
      TIMEOUT_MS,
    );
  });
}

if (IS_ROOT) {
  sharedTmpSuite(
    "a root daemon",
    () => startDaemon({ env: { PATH: "/usr/local/bin:/usr/bin:/bin" } }),
    0,
  );
  sharedTmpSuite(
    "an unprivileged daemon",
    () =>
      startDaemon({
        env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/nonexistent" },
        daemonUid: DAEMON_UID,
      }),
    DAEMON_UID,
  );
} else {
  console.log("shared /tmp tests through the binary skipped: they need root (run as root)");
}
