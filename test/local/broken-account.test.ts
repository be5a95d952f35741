/**
 * One principal's broken unix account stalls nobody else (issue 32, root only). Staged as it
 * happened: on a `run_as = "owner"` profile, a principal whose account was deleted after it
 * was added (they left) submits first; each of its workloads was refused at submission and
 * counted by the profile's breaker, the profile was degraded for everyone after 3, and a
 * valid principal's one-second job waited out the back-off (7.5 minutes as measured, with
 * the bad workloads picked first at every trial). Now each of the broken account's
 * workloads ends FAILED with ACCOUNT_UNUSABLE naming the account, the breaker never counts
 * them, and the valid principal's job runs at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { createOwnerAccount, type OwnerAccount, principalToken } from "../support/owner-account.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;

interface View {
  readonly phase: string;
  readonly reason: string | null;
  readonly message: string | null;
}

describe.if(IS_ROOT)("a principal whose unix account is gone", () => {
  let dir: string;
  let daemon: RunningDaemon;
  let base: string;
  let valid: OwnerAccount;
  let gone: OwnerAccount;
  let validToken: string;
  let goneToken: string;

  const call = (method: string, path: string, bearer: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const submit = async (bearer: string, command: readonly string[]) => {
    const created = await call("POST", "/v1/workloads", bearer, {
      kind: "BATCH",
      profile: "default",
      command,
    });
    expect(created.status).toBe(201);
    return String(((await created.json()) as { id: string }).id);
  };
  const view = async (id: string, bearer: string) =>
    (await (await call("GET", `/v1/workloads/${id}`, bearer)).json()) as View;

  beforeAll(async () => {
    dir = makeTempDir("o4s-broken-account-");
    valid = createOwnerAccount();
    gone = createOwnerAccount();
    const stateDir = join(dir, "state");
    const defaults = localDaemonConfig(stateDir);
    daemon = await startedDaemon(
      localDaemonConfig(stateDir, {
        listen: [
          { kind: "unix", path: join(stateDir, "api.sock") },
          { kind: "tcp", host: "127.0.0.1", port: 0 },
        ],
        // The shipped defaults: 3 refusals open the breaker, then 30 s of back-off.
        env: { ...defaults.env, OPENAI4S_LOCAL_RUN_AS: "owner" },
      }),
    );
    base = `http://${daemon.listening.find((l) => !l.startsWith("unix:"))}`;
    const adminToken = readFileSync(daemon.layout.adminToken, "utf8").trim();
    validToken = await principalToken(base, adminToken, "stays", valid.user);
    goneToken = await principalToken(base, adminToken, "left", gone.user);
    // They left: the account is deleted, the principal is still there.
    gone.remove();
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    valid?.remove();
    if (dir) removeDir(dir);
  });

  test("its workloads fail naming the account; a valid principal's 1 s job runs at once", async () => {
    const broken: string[] = [];
    for (let i = 0; i < 5; i++) broken.push(await submit(goneToken, ["/bin/true"]));
    const ok = await submit(validToken, ["/bin/sleep", "1"]);
    const startedAt = Date.now();
    const done = await eventually(
      async () => {
        const v = await view(ok, validToken);
        return v.phase === "COMPLETED" || v.phase === "FAILED" ? v : null;
      },
      // Well inside the 30 s back-off the breaker would have imposed.
      { timeoutMs: 20_000, intervalMs: 100, what: "the valid principal's job to end" },
    ).catch(async () => view(ok, validToken));
    console.log(
      `valid principal's 1 s job: ${done.phase} after ${((Date.now() - startedAt) / 1000).toFixed(1)} s`,
    );
    expect(done).toMatchObject({ phase: "COMPLETED" });
    for (const id of broken) {
      const v = await eventually(
        async () => {
          const w = await view(id, goneToken);
          return w.phase === "FAILED" ? w : null;
        },
        { timeoutMs: 10_000, intervalMs: 100, what: `${id} FAILED` },
      ).catch(async () => view(id, goneToken));
      expect(v).toMatchObject({
        phase: "FAILED",
        reason: "ACCOUNT_UNUSABLE",
        message: expect.stringContaining(JSON.stringify(gone.user)),
      });
    }
    const profiles = (await (await call("GET", "/v1/profiles", validToken)).json()) as {
      profiles: { name: string; degraded: unknown }[];
    };
    expect(profiles.profiles.find((p) => p.name === "default")?.degraded ?? null).toBeNull();
  }, 60_000);
});
