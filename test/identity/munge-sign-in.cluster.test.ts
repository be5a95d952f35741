/**
 * No token on the login node (issue 32): the CLI proves its user with MUNGE, the daemon
 * verifies with `unmunge` and maps the uid to its principal. On the test cluster's real
 * munged, with two unix users made here (root only; removed after): each sees only their own
 * work through the users' socket and over TCP; root is the admin; replayed, expired, rebound
 * and wrong-daemon credentials are 401.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { mungePayload } from "../../src/adapters/identity-munge/munge-payload.ts";
import { composeSiteIdentity } from "../../src/apps/daemon/composition/site-identity.ts";
import type { ApiBindings } from "../../src/servers/http/deps.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { createOwnerAccount, type OwnerAccount } from "../support/owner-account.ts";
import { testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const ROOT = resolve(import.meta.dir, "../..");
const BUN = process.execPath;

describe.skipIf(testCluster === null || !IS_ROOT)("MUNGE sign-in on the cluster's munged", () => {
  const mungeSocket = join(testCluster?.dir ?? "", "munge", "munge.sock");
  let dir = "";
  let alice: OwnerAccount;
  let bob: OwnerAccount;
  let h: Harness;
  let usersSocket = "";
  let tcp = "";
  const servers: { stop(force: boolean): void }[] = [];

  /** The daemon's API over a users' socket (0666) and TCP, both taking MUNGE. */
  function serve(createPrincipals: boolean): Harness {
    const made = harness({
      siteIdentity: (clock) => {
        const identity = composeSiteIdentity(
          {
            oidc: null,
            munge: { socket: mungeSocket, createPrincipals },
            usersSocket: null,
          },
          process.env,
          clock,
        );
        if (identity === null || "error" in identity) throw new Error("no identity");
        return identity;
      },
    });
    made.clock.set(Date.now());
    return made;
  }

  beforeAll(() => {
    dir = makeTempDir("o4s-munge-");
    chmodSync(dir, 0o755);
    alice = createOwnerAccount();
    bob = createOwnerAccount();
    h = serve(true);
    usersSocket = join(dir, "users.sock");
    const bindings = (socketPath?: string): ApiBindings => ({
      access: {
        kind: "Bearer",
        token: "admin-token-not-given",
        ...(socketPath ? { socketPath } : {}),
      },
    });
    const onSocket = Bun.serve({
      unix: usersSocket,
      fetch: (request) => h.app.fetch(request, bindings(usersSocket)),
    });
    chmodSync(usersSocket, 0o666);
    const onTcp = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (request) => h.app.fetch(request, bindings()),
    });
    tcp = `http://127.0.0.1:${onTcp.port}`;
    servers.push(onSocket, onTcp);
  });

  afterAll(() => {
    for (const s of servers) s.stop(true);
    h?.close();
    alice?.remove();
    bob?.remove();
    if (dir !== "") removeDir(dir);
  });

  /** The real CLI, run as `who` (setpriv), with no token: MUNGE from the site's settings. */
  async function cli(who: OwnerAccount | null, args: readonly string[]) {
    const settings = join(dir, "client.toml");
    writeFileSync(
      settings,
      `socket = "${usersSocket}"\nmunge = true\nmunge_socket = "${mungeSocket}"\n`,
    );
    const as =
      who === null ? [] : ["setpriv", `--reuid=${who.uid}`, `--regid=${who.gid}`, "--clear-groups"];
    const child = Bun.spawn([...as, BUN, join(ROOT, "src/main.ts"), ...args], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: dir,
        OPENAI4S_CLIENT_CONFIG: settings,
        OPENAI4S_STATE_DIR: join(dir, "nobody-state"),
        BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0",
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    return { out, err, code };
  }

  /** A credential `who` makes with `munge` for this payload (and TTL). */
  function credential(who: OwnerAccount, payload: string, ttlSeconds?: number): string {
    const made = Bun.spawnSync([
      "setpriv",
      `--reuid=${who.uid}`,
      `--regid=${who.gid}`,
      "--clear-groups",
      "munge",
      "-S",
      mungeSocket,
      ...(ttlSeconds === undefined ? [] : ["-t", String(ttlSeconds)]),
      "-s",
      payload,
    ]);
    if (made.exitCode !== 0) throw new Error(made.stderr.toString());
    return made.stdout.toString().trim();
  }

  test("each user, by the CLI with no token, sees only their own work; root is the admin", async () => {
    const submitted = await cli(alice, ["submit", "--json", "--", "true"]);
    expect(submitted.err).toBe("");
    expect(submitted.code).toBe(0);
    const mine = JSON.parse(submitted.out) as { id: string; owner: string };
    expect(mine.owner).toBe(alice.user);
    const bobs = await cli(bob, ["list", "--json"]);
    expect(bobs.code).toBe(0);
    expect((JSON.parse(bobs.out) as { items: unknown[] }).items).toEqual([]);
    const peek = await cli(bob, ["show", mine.id]);
    expect(peek.code).toBe(1);
    expect(peek.err).toContain("no workload");
    const alices = await cli(alice, ["list", "--json"]);
    expect((JSON.parse(alices.out) as { items: { id: string }[] }).items.map((w) => w.id)).toEqual([
      mine.id,
    ]);
    // Root's credential is the admin's: everyone's work, and the admin's routes.
    const admin = await cli(null, ["principal", "list", "--json"]);
    expect(admin.err).toBe("");
    const names = (JSON.parse(admin.out) as { items: { name: string; unixUser: string }[] }).items;
    expect(names.map((p) => p.unixUser).sort()).toEqual([alice.user, bob.user].sort());
  });

  test("over TCP, a credential bound to the request and this daemon's address", async () => {
    const host = new URL(tcp).host;
    const payload = mungePayload({ method: "GET", path: "/v1/workloads", audience: `tcp:${host}` });
    const cred = credential(alice, payload);
    const get = (path: string, c: string) =>
      fetch(`${tcp}${path}`, { headers: { Authorization: `MUNGE ${c}` } });
    expect((await get("/v1/workloads", cred)).status).toBe(200);
    // Replayed: munged has seen it; refused.
    const replayed = await get("/v1/workloads", cred);
    expect(replayed.status).toBe(401);
    expect(((await replayed.json()) as { detail: string }).detail).toContain("replayed");
    // Another request, another daemon's address: refused.
    const forList = credential(alice, payload);
    const other = await get("/v1/profiles", forList);
    expect(other.status).toBe(401);
    expect(((await other.json()) as { detail: string }).detail).toContain("another request");
    const elsewhere = mungePayload({
      method: "GET",
      path: "/v1/workloads",
      audience: "tcp:login9:8470",
    });
    const wrongDaemon = await get("/v1/workloads", credential(alice, elsewhere));
    expect(((await wrongDaemon.json()) as { detail: string }).detail).toContain("another daemon");
    // Bound to the users' socket, presented over TCP: refused as well.
    const socketBound = mungePayload({
      method: "GET",
      path: "/v1/workloads",
      audience: `unix:${usersSocket}`,
    });
    expect((await get("/v1/workloads", credential(alice, socketBound))).status).toBe(401);
  });

  test("an expired credential is refused", async () => {
    const host = new URL(tcp).host;
    const payload = mungePayload({ method: "GET", path: "/v1/workloads", audience: `tcp:${host}` });
    const cred = credential(bob, payload, 1);
    // MUNGE's TTL is on the wall clock, in whole seconds: wait it out (no fake clock here).
    const madeAt = Date.now();
    while (Date.now() - madeAt < 2_100) await Bun.sleep(100);
    const answer = await fetch(`${tcp}/v1/workloads`, {
      headers: { Authorization: `MUNGE ${cred}` },
    });
    expect(answer.status).toBe(401);
    expect(((await answer.json()) as { detail: string }).detail).toContain("expired");
  });

  test("where the site does not create principals, an unknown user is told how to get one", async () => {
    const strict = serve(false);
    try {
      const carol = createOwnerAccount();
      try {
        const payload = mungePayload({ method: "GET", path: "/v1/workloads", audience: "unix:/s" });
        const answer = await strict.app.fetch(
          new Request("http://localhost/v1/workloads", {
            headers: { Authorization: `MUNGE ${credential(carol, payload)}` },
          }),
          { access: { kind: "Bearer", token: "x", socketPath: "/s" } },
        );
        expect(answer.status).toBe(403);
        expect(((await answer.json()) as { detail: string }).detail).toContain("principal add");
      } finally {
        carol.remove();
      }
    } finally {
      strict.close();
    }
  });
});
