/**
 * Run as the owner on the REAL cluster (issue 22): a principal's job on a profile with
 * `run_as = "owner"` is submitted as the principal's unix account, so `sacct` shows the
 * scientist as User; the job runs with the account's uid, primary gid and supplementary
 * groups, and what it writes in its workspace is the scientist's. The admin, who has no
 * account, is refused on such a profile with a message saying why. On a profile with declared
 * mounts, once the nodes' sandbox is verified, the job writes a file owned by the scientist
 * on its `rw` mount (`{user}`: their own directory) while its `ro` mount refuses writes. The
 * test makes its own unix account and group (useradd/groupadd) and removes them after.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import {
  clusterDaemonFor,
  OWNER_PROFILE_TOML,
  ownerProfileToml,
  tcpBase,
} from "../support/cluster-daemon.ts";
import { startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import {
  createOwnerAccount,
  type OwnerAccount,
  principalToken,
  run,
} from "../support/owner-account.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;

interface WorkloadView {
  readonly phase: string;
  readonly message: string | null;
  readonly allocations: readonly { readonly backendJobId: string | null }[];
}

/** An unmapped group in a user namespace reads as the overflow gid (nogroup). */
const OVERFLOW_GID = 65534;

/**
 * `id -G` of an owner's job: its primary gid and its lab group. Inside the sandbox (a user
 * namespace the account made, as it is not root) a supplementary group is still held and
 * still grants access on the host, but reads as the overflow gid, since only the account's
 * own ids are mapped; outside it, as itself.
 */
function expectOwnerGroups(line: string | undefined, account: OwnerAccount): void {
  const groups = (line ?? "").split(" ").map(Number);
  expect(groups[0]).toBe(account.gid);
  expect(groups).toHaveLength(2);
  expect([account.labGid, OVERFLOW_GID]).toContain(groups[1] as number);
}

describe.skipIf(testCluster === null || !IS_ROOT)("slurm-cluster run as the owner", () => {
  const cluster = testCluster as TestCluster;
  let account: OwnerAccount;
  let dir: string;
  let daemon: RunningDaemon;
  let base: string;
  let adminToken: string;
  let token: string;
  const slurmEnv = () => ({ SLURM_CONF: cluster.slurmConf, PATH: cluster.path });

  const call = (method: string, path: string, bearer: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  const submit = async (bearer: string, command: readonly string[], profile = "mine") => {
    const created = await call("POST", "/v1/workloads", bearer, {
      kind: "BATCH",
      profile,
      command,
    });
    expect(created.status).toBe(201);
    return String(((await created.json()) as { id: string }).id);
  };

  const ended = (id: string, bearer: string) =>
    eventually(
      async () => {
        const view = (await (await call("GET", `/v1/workloads/${id}`, bearer)).json()) as
          | WorkloadView
          | undefined;
        return view !== undefined && ["COMPLETED", "FAILED"].includes(view.phase) ? view : null;
      },
      { timeoutMs: 90_000, intervalMs: 250, what: `workload ${id} to end` },
    ) as Promise<WorkloadView>;

  let early: string;
  let sandboxedAtEarlySubmit: boolean;
  const launchesSandboxed = async () => {
    const diagnostics = (await (await call("GET", "/v1/diagnostics", adminToken)).json()) as {
      isolation?: { launchesSandboxed?: boolean };
    };
    return diagnostics.isolation?.launchesSandboxed === true;
  };

  beforeAll(async () => {
    dir = makeTempDir("o4s-slurm-owner-");
    // The spool's parent, as a site's would be: the job's account passes through to its own
    // directories (mkdtemp made it 0700).
    chmodSync(dir, 0o711);
    account = createOwnerAccount();
    // Both the account's own: only the read-only bind, not a permission, refuses a write.
    for (const d of [join(dir, "ref"), join(dir, "data", account.user)]) {
      mkdirSync(d, { recursive: true, mode: 0o755 });
      chownSync(d, account.uid, account.gid);
    }
    chmodSync(join(dir, "data"), 0o711);
    writeFileSync(join(dir, "ref", "in.txt"), "reference\n", { mode: 0o644 });
    daemon = await startedDaemon(
      clusterDaemonFor(cluster, dir, join(dir, "api.sock"), {
        toml: [
          OWNER_PROFILE_TOML,
          ownerProfileToml("mine-data", "one CPU, as its owner, with data"),
          "[profiles.mine-data.mounts.ref]",
          `source = "${dir}/ref"`,
          'target = "/ref"',
          'mode = "ro"',
          "[profiles.mine-data.mounts.data]",
          `source = "${dir}/data/{user}"`,
          'target = "/data"',
          'mode = "rw"',
          "",
        ].join("\n"),
        tcp: true,
      }),
    );
    base = tcpBase(daemon);
    adminToken = readFileSync(daemon.layout.adminToken, "utf8").trim();
    token = await principalToken(base, adminToken, "sci", account.user);
    // Issue 33: on a fresh state dir the nodes' sandbox is not verified yet, and a job of a
    // profile with mounts failed at once (SUBMIT_REJECTED); it must wait for the verdict.
    sandboxedAtEarlySubmit = await launchesSandboxed();
    early = await submit(
      token,
      ["/bin/sh", "-c", "cat /ref/in.txt; echo early > /data/early.txt"],
      "mine-data",
    );
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    if (account) {
      const env = { ...process.env, ...slurmEnv() };
      Bun.spawnSync({ cmd: ["scancel", `--user=${account.user}`], env });
      account.remove();
    }
    if (dir) removeDir(dir);
  });

  test("sacct shows the scientist; the job has their ids and groups; its files are theirs", async () => {
    const id = await submit(token, ["/bin/sh", "-c", "id -u; id -G; echo result > made.txt"]);
    const view = await ended(id, token);
    expect(view).toMatchObject({ phase: "COMPLETED" });
    const jobId = view.allocations.at(-1)?.backendJobId ?? "";
    expect(jobId).toMatch(/^\d+$/);
    // Accounting catches up a moment after the job ends (and a restarted test cluster may
    // hold an older job of the same id until then): asked until it names the job's user.
    const sacctUser = () =>
      run(["sacct", "-n", "-X", "-P", "-o", "User", "-j", jobId], slurmEnv()).trim();
    const user = account.user;
    await eventually(() => sacctUser() === user, {
      timeoutMs: 30_000,
      intervalMs: 250,
      what: `sacct to name ${user} as the user of job ${jobId}`,
    });
    const workspace = join(daemon.layout.spool, "workloads", id, "workspace");
    expect(lstatSync(join(workspace, "made.txt")).uid).toBe(account.uid);
    expect(lstatSync(workspace).uid).toBe(account.uid);
    const logs = await (await call("GET", `/v1/workloads/${id}/logs?stream=stdout`, token)).text();
    const [idLine, groupLine] = logs.trim().split("\n");
    expect(idLine).toBe(String(account.uid));
    expectOwnerGroups(groupLine, account);
  }, 120_000);

  test("a step in the owner's running job runs as the owner", async () => {
    const id = await submit(token, ["/bin/sh", "-c", "sleep 120"]);
    await eventually(
      async () =>
        ((await (await call("GET", `/v1/workloads/${id}`, token)).json()) as WorkloadView).phase ===
        "RUNNING",
      { timeoutMs: 60_000, intervalMs: 250, what: "the job to run" },
    );
    const step = await call("POST", `/v1/workloads/${id}/tasks`, token, {
      command: ["/bin/sh", "-c", "id -u; id -G"],
    });
    const body = (await step.json()) as { exitCode: number; stdout: string; stderr: string };
    expect(body).toMatchObject({ exitCode: 0 });
    const [uid, groups] = body.stdout.trim().split("\n");
    expect(uid).toBe(String(account.uid));
    expectOwnerGroups(groups, account);
    expect((await call("POST", `/v1/workloads/${id}/cancel`, token)).status).toBeLessThan(300);
  }, 120_000);

  test("a mount profile's job submitted before the nodes' sandbox is verified waits for it, then runs", async () => {
    // Submitted while no verdict existed, or this test proves nothing.
    expect(sandboxedAtEarlySubmit).toBe(false);
    const view = await ended(early, token);
    const logs = await (
      await call("GET", `/v1/workloads/${early}/logs?stream=stdout`, token)
    ).text();
    expect({ phase: view.phase, message: view.message, out: logs }).toEqual({
      phase: "COMPLETED",
      message: view.message,
      out: "reference\n",
    });
    expect(readFileSync(join(dir, "data", account.user, "early.txt"), "utf8")).toBe("early\n");
  }, 150_000);

  test("its rw mount takes the scientist's file; its ro mount refuses writes", async () => {
    // Mounts exist only in the sandbox: wait until the nodes' sandbox is verified.
    await eventually(launchesSandboxed, {
      timeoutMs: 90_000,
      intervalMs: 500,
      what: "the nodes' sandbox to be verified",
    });
    const script =
      "if echo x > /ref/new.txt; then echo ro-written; else echo ro-refused; fi; echo mine > /data/out.txt && echo rw-written";
    const id = await submit(token, ["/bin/sh", "-c", script], "mine-data");
    const view = await ended(id, token);
    const logs = await (await call("GET", `/v1/workloads/${id}/logs?stream=stdout`, token)).text();
    expect({ phase: view.phase, message: view.message, lines: logs.trim().split("\n") }).toEqual({
      phase: "COMPLETED",
      message: view.message,
      lines: ["ro-refused", "rw-written"],
    });
    expect(existsSync(join(dir, "ref", "new.txt"))).toBe(false);
    expect(lstatSync(join(dir, "data", account.user, "out.txt"))).toMatchObject({
      uid: account.uid,
      gid: account.gid,
    });
    // A step in such a job sees the same mounts.
    const held = await submit(token, ["/bin/sh", "-c", "sleep 120"], "mine-data");
    await eventually(
      async () =>
        ((await (await call("GET", `/v1/workloads/${held}`, token)).json()) as WorkloadView)
          .phase === "RUNNING",
      { timeoutMs: 60_000, intervalMs: 250, what: "the job to run" },
    );
    const step = await call("POST", `/v1/workloads/${held}/tasks`, token, {
      command: ["/bin/sh", "-c", "cat /data/out.txt && echo step > /data/step.txt"],
    });
    expect(await step.json()).toMatchObject({ exitCode: 0, stdout: "mine\n" });
    expect(lstatSync(join(dir, "data", account.user, "step.txt")).uid).toBe(account.uid);
    expect((await call("POST", `/v1/workloads/${held}/cancel`, token)).status).toBeLessThan(300);
  }, 150_000);

  test("the admin has no account: refused on an owner profile, saying why", async () => {
    const refused = await call("POST", "/v1/workloads", adminToken, {
      kind: "BATCH",
      profile: "mine",
      command: ["/bin/true"],
    });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/runs work as its owner's unix account, and the admin/);
  }, 120_000);
});
