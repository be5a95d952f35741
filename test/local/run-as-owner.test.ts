/**
 * Run as the owner on the local backend (issue 22, root only): with OPENAI4S_LOCAL_RUN_AS=owner
 * a principal's job drops to the principal's unix account (uid, primary gid and
 * supplementary groups) inside the sandbox, its workspace and what it writes are the
 * account's, an upload made before it starts is the account's too, and `GET /v1/profiles`
 * says so. The admin's own job is refused on such a profile, naming why. The profile's
 * declared mounts are there: the `ro` one refuses writes inside the job, and what the job
 * writes on the `rw` one (`{user}`: the owner's own directory) is the owner's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chownSync, existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type RunningDaemon, startDaemon } from "../../src/apps/daemon/daemon.ts";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { createOwnerAccount, type OwnerAccount, principalToken } from "../support/owner-account.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;

interface WorkloadView {
  readonly phase: string;
  readonly message: string | null;
}

describe.if(IS_ROOT)("local run as the owner", () => {
  let dir: string;
  let daemon: RunningDaemon;
  let base: string;
  let adminToken: string;
  let token: string;
  let account: OwnerAccount;

  const call = (method: string, path: string, bearer: string, body?: string) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body }),
    });

  const submit = async (bearer: string, command: readonly string[]) => {
    const created = await call(
      "POST",
      "/v1/workloads",
      bearer,
      JSON.stringify({ kind: "BATCH", profile: "default", command }),
    );
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
      { timeoutMs: 30_000, intervalMs: 100, what: `workload ${id} to end` },
    ) as Promise<WorkloadView>;

  beforeAll(async () => {
    dir = makeTempDir("o4s-local-owner-");
    account = createOwnerAccount();
    mkdirSync(join(dir, "ref"));
    writeFileSync(join(dir, "ref", "in.txt"), "reference\n");
    // The owner's own directory: only the read-only bind, not a permission, stops a write.
    chownSync(join(dir, "ref"), account.uid, account.gid);
    mkdirSync(join(dir, "data", account.user), { recursive: true });
    chownSync(join(dir, "data", account.user), account.uid, account.gid);
    const stateDir = join(dir, "state");
    const defaults = localDaemonConfig(stateDir);
    daemon = await startedDaemon(
      localDaemonConfig(stateDir, {
        listen: [
          { kind: "unix", path: join(stateDir, "api.sock") },
          { kind: "tcp", host: "127.0.0.1", port: 0 },
        ],
        env: {
          ...defaults.env,
          OPENAI4S_LOCAL_RUN_AS: "owner",
          OPENAI4S_LOCAL_MOUNTS: `${dir}/ref:/ref:ro,${dir}/data/{user}:/data:rw`,
        },
      }),
    );
    base = `http://${daemon.listening.find((l) => !l.startsWith("unix:"))}`;
    adminToken = readFileSync(daemon.layout.adminToken, "utf8").trim();
    token = await principalToken(base, adminToken, "sci", account.user);
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    account?.remove();
    if (dir) removeDir(dir);
  });

  test("the profile says so, and shows its mounts' targets and modes only", async () => {
    const listed = (await (await call("GET", "/v1/profiles", token)).json()) as {
      profiles: { runAs: string; mounts: unknown }[];
    };
    expect(listed.profiles.map((p) => p.runAs)).toEqual(["owner"]);
    expect(listed.profiles[0]?.mounts).toEqual([
      { target: "/ref", mode: "ro" },
      { target: "/data", mode: "rw" },
    ]);
  });

  test("an ro mount refuses writes inside the job; the rw one takes the owner's files", async () => {
    const id = await submit(token, [
      "/bin/sh",
      "-c",
      "cat /ref/in.txt; if echo x > /ref/new.txt; then echo ro-written; else echo ro-refused; fi; echo mine > /data/out.txt && echo rw-written",
    ]);
    expect((await ended(id, token)).phase).toBe("COMPLETED");
    const logs = await (await call("GET", `/v1/workloads/${id}/logs?stream=stdout`, token)).text();
    expect(logs.trim().split("\n")).toEqual(["reference", "ro-refused", "rw-written"]);
    expect(existsSync(join(dir, "ref", "new.txt"))).toBe(false);
    expect(lstatSync(join(dir, "data", account.user, "out.txt"))).toMatchObject({
      uid: account.uid,
      gid: account.gid,
    });
  }, 60_000);

  test("the job has the owner's ids and groups; its workspace and files are theirs", async () => {
    const id = await submit(token, [
      "/bin/sh",
      "-c",
      "while [ ! -f input.txt ]; do sleep 0.1; done; cat input.txt; id -u; id -g; id -G; echo out > made.txt",
    ]);
    const put = await call("PUT", `/v1/workloads/${id}/files/input.txt?mode=0600`, token, "in\n");
    expect(put.status).toBe(201);
    expect((await ended(id, token)).phase).toBe("COMPLETED");
    const workspace = daemon.layout.workspaceDir(id);
    for (const path of [workspace, join(workspace, "input.txt"), join(workspace, "made.txt")]) {
      expect(lstatSync(path)).toMatchObject({ uid: account.uid, gid: account.gid });
    }
    const logs = await (await call("GET", `/v1/workloads/${id}/logs?stream=stdout`, token)).text();
    const [input, uid, gid, groups] = logs.trim().split("\n");
    expect([input, uid, gid]).toEqual(["in", String(account.uid), String(account.gid)]);
    expect(groups?.split(" ").map(Number).sort()).toEqual([account.gid, account.labGid].sort());
  }, 60_000);

  test("the admin has no account: refused on an owner profile, saying why", async () => {
    const refused = await call(
      "POST",
      "/v1/workloads",
      adminToken,
      JSON.stringify({ kind: "BATCH", profile: "default", command: ["/bin/true"] }),
    );
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/runs work as its owner's unix account, and the admin/);
  }, 60_000);
});

describe("a daemon that cannot switch uids", () => {
  test("refuses to start with an owner profile, naming it", async () => {
    const dir = makeTempDir("o4s-owner-refused-");
    try {
      const stateDir = join(dir, "state");
      const defaults = localDaemonConfig(stateDir);
      const started = await startDaemon(
        localDaemonConfig(stateDir, {
          // What a daemon not running as root is given: jobs keep its uid.
          identity: { kind: "DaemonUid" },
          env: { ...defaults.env, OPENAI4S_LOCAL_RUN_AS: "owner" },
        }),
      );
      if (started.kind === "Started") await started.daemon.stop();
      expect(started).toMatchObject({
        kind: "ConfigError",
        message: expect.stringMatching(/profile "default" runs work as its owner.*root/),
      });
    } finally {
      removeDir(dir);
    }
  });
});
