/**
 * A SESSION run as its owner on the local backend (issue 22, root only), through the built
 * binary: with OPENAI4S_LOCAL_RUN_AS=owner a principal's session starts its kernel as the
 * principal's unix account (uid, primary gid, supplementary groups), a file uploaded while it
 * runs is the owner's and readable by the kernel, and a file a cell writes in the workspace,
 * like the workspace itself, is the owner's and downloadable. test/local/
 * run-as-owner.test.ts is the BATCH side of the same rule.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { lstatSync } from "node:fs";
import { join } from "node:path";
import {
  type Daemon,
  ensureBuilt,
  freePort,
  startDaemon,
  type WorkloadView,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { createOwnerAccount, type OwnerAccount, principalToken } from "../support/owner-account.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 90_000;

describe.if(IS_ROOT)("local session run as the owner", () => {
  let d: Daemon;
  let account: OwnerAccount;
  let base: string;
  let token: string;
  const sessions: string[] = [];

  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  beforeAll(async () => {
    ensureBuilt();
    account = createOwnerAccount();
    const port = await freePort();
    d = await startDaemon({
      args: ["--listen", `127.0.0.1:${port}`],
      env: { OPENAI4S_LOCAL_RUN_AS: "owner" },
    });
    base = `http://127.0.0.1:${port}`;
    const adminToken = (await Bun.file(join(d.stateDir, "admin-token")).text()).trim();
    token = await principalToken(base, adminToken, "sci", account.user);
  }, 120_000);

  afterAll(async () => {
    for (const id of sessions) await d?.cli("cancel", id);
    for (const id of sessions) await d?.cli("wait", id, "--until", "TERMINAL", "--timeout", "20s");
    await d?.stop();
    account?.remove();
  }, 60_000);

  test(
    "the kernel runs as the owner's uid; what a cell writes in the workspace is theirs",
    async () => {
      const created = await call("POST", "/v1/workloads", { kind: "SESSION", profile: "default" });
      expect(created.status).toBe(201);
      const id = String(((await created.json()) as { id: string }).id);
      sessions.push(id);
      await eventually(
        async () => {
          const view = (await (await call("GET", `/v1/workloads/${id}`)).json()) as WorkloadView;
          if (["FAILED", "CANCELLED", "COMPLETED"].includes(view.phase)) {
            throw new Error(`session ended: ${JSON.stringify(view)}\n${d.log()}`);
          }
          return view.conditions.some((c) => c.type === "READY" && c.status === "TRUE");
        },
        { timeoutMs: 60_000, intervalMs: 200, what: `session ${id} READY` },
      );
      const put = await fetch(`${base}/v1/workloads/${id}/files/given.txt?mode=0600`, {
        method: "PUT",
        headers: { authorization: `Bearer ${token}` },
        body: "given\n",
      });
      expect(put.status).toBe(201);
      const cell = await call("POST", `/v1/workloads/${id}/exec`, {
        code: "import os\nopen('made-by-cell.txt', 'w').write(open('given.txt').read())\n(os.getuid(), os.geteuid(), os.getgid(), sorted(os.getgroups()))",
      });
      expect(cell.status).toBe(200);
      const body = (await cell.json()) as { status: string; output: string };
      const groups = [account.gid, account.labGid].sort((a, b) => a - b).join(", ");
      expect(body).toMatchObject({
        status: "OK",
        output: `(${account.uid}, ${account.uid}, ${account.gid}, [${groups}])`,
      });
      const workspace = join(`${d.stateDir}-spool`, "workloads", id, "workspace");
      for (const name of ["", "given.txt", "made-by-cell.txt"]) {
        expect(lstatSync(join(workspace, name))).toMatchObject({
          uid: account.uid,
          gid: account.gid,
        });
      }
      const made = await call("GET", `/v1/workloads/${id}/files/made-by-cell.txt`);
      expect(await made.text()).toBe("given\n");
    },
    TIMEOUT_MS,
  );
});
