/**
 * People are who the site says they are (issue 32), staged through the BUILT binary on the
 * REAL two-node cluster: a root daemon whose profile runs work as its owner
 * (`run_as = "owner"`). Ann signs in with a JWT from the site's OIDC issuer (a test issuer
 * on loopback); Ben runs the CLI on the login node with no token at all, proved by the
 * cluster's munged through the users' socket. Each submits a BATCH job and starts a session
 * and runs a cell in it; each job runs as its owner's uid, and `sacct` says so for each.
 *
 * Ben is, where this machine's NSS asks libnss-extrausers, an account /etc/passwd does not
 * name (as a site's LDAP or SSSD users are): his sign-in, the principal made for him and
 * his jobs all find him through NSS. The test makes the two accounts (root only) and
 * removes them after.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BINARY,
  type Daemon,
  ensureBuilt,
  freePort,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { createExtrausersAccount, extrausersConfigured } from "../support/extrausers-account.ts";
import { createOwnerAccount, type OwnerAccount } from "../support/owner-account.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";
import { startTestIssuer, type TestIssuer } from "../support/test-issuer.ts";

const IS_ROOT = process.getuid?.() === 0;

// `mine` first: the isolation probe runs on the first profile that takes sessions.
const CLUSTER_TOML = `[profiles.mine]
description = "One CPU, as its owner"
partition = "debug"
cpus = 1
memory_mb = 400
time_limit_minutes = 10
allow_sessions = true
allow_batch = true
run_as = "owner"
`;

interface Ran {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

describe.skipIf(testCluster === null || !IS_ROOT)("site users on the cluster, root daemon", () => {
  const cluster = testCluster as TestCluster;
  const slurmEnv = { PATH: cluster?.path ?? "", SLURM_CONF: cluster?.slurmConf ?? "" };
  const mungeSocket = join(cluster?.dir ?? "", "munge", "munge.sock");
  let issuer: TestIssuer;
  let ann: OwnerAccount;
  let ben: OwnerAccount;
  let scratch: string;
  let d: Daemon;
  let tcp: string;
  let usersSocket: string;

  beforeAll(async () => {
    ensureBuilt();
    issuer = await startTestIssuer();
    ann = createOwnerAccount();
    ben = extrausersConfigured() ? createExtrausersAccount() : createOwnerAccount();
    scratch = makeTempDir("o4s-site-users-");
    chmodSync(scratch, 0o755);
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, CLUSTER_TOML, { mode: 0o644 });
    usersSocket = join(scratch, "users.sock");
    const port = await freePort();
    tcp = `http://127.0.0.1:${port}`;
    d = await startDaemon({
      args: [
        ...["--backend", "slurm", "--cluster-config", config, "--listen", `127.0.0.1:${port}`],
        ...["--oidc-issuer", issuer.url, "--oidc-audience", issuer.audience],
        ...["--munge", "--munge-socket", mungeSocket, "--munge-create-principals"],
        ...["--users-socket", usersSocket],
      ],
      env: { ...slurmEnv, HOME: scratch },
      startTimeoutMs: 120_000,
    });
    // The owners' jobs open their logs below the daemon's directory (made 0700).
    chmodSync(d.dir, 0o711);
    await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
      what: "isolation verified on the nodes",
      timeoutMs: 120_000,
    });
  }, 180_000);

  afterAll(async () => {
    issuer?.stop();
    await d?.stop();
    for (const who of [ann, ben]) {
      if (who === undefined) continue;
      Bun.spawnSync({ cmd: ["scancel", `--user=${who.user}`], env: slurmEnv });
      who.remove();
    }
    if (scratch !== undefined) removeDir(scratch);
  }, 60_000);

  /** The built CLI, run as `who` (setpriv, its own groups cleared), with `env` added. */
  async function cli(
    who: OwnerAccount,
    env: Readonly<Record<string, string>>,
    args: readonly string[],
  ): Promise<Ran> {
    const child = Bun.spawn(
      [
        ...["setpriv", `--reuid=${who.uid}`, `--regid=${who.gid}`, "--clear-groups"],
        ...[BINARY, ...args],
      ],
      {
        env: { PATH: "/usr/bin:/bin", HOME: scratch, ...env },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const [out, err, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    return { code, out, err };
  }

  /** The job's owner by uid in accounting, once it names one of `uids`. */
  function sacctUid(jobId: string, uid: number): Promise<string> {
    // sacct lags, and the first row of a job submitted for another uid can carry the
    // submitter's (0) for a moment (mpi-pmix-root.cluster.test.ts): asked until it is the
    // owner's, and the last answer is what a failure shows.
    let last = "";
    return eventually(
      () => {
        const r = Bun.spawnSync({
          cmd: ["sacct", "-n", "-P", "-X", "-j", jobId, "-o", "UID"],
          env: slurmEnv,
          stdout: "pipe",
        });
        last = r.stdout.toString().trim();
        return last === String(uid) ? last : null;
      },
      { what: `sacct to name uid ${uid} for job ${jobId}`, timeoutMs: 30_000, intervalMs: 500 },
    ).catch(() => last);
  }

  /**
   * As `who`: a BATCH job printing its uid, and a session whose cell prints its uid; each
   * job's uid in sacct. `env` is how the CLI proves `who` (a JWT, or MUNGE settings).
   */
  async function stage(who: OwnerAccount, env: Readonly<Record<string, string>>) {
    const run = (...args: string[]) => cli(who, env, args);
    /** What `args` printed, or a throw with what it said (with --json, on stdout). */
    const ok = async (...args: string[]) => {
      const ran = await run(...args);
      if (ran.code !== 0) throw new Error(`${args[0]} as ${who.user}: ${ran.out}${ran.err}`);
      return ran.out;
    };
    const jobOf = async (id: string) => {
      const view = JSON.parse(await ok("show", id, "--json")) as {
        owner: string;
        allocations: { backendJobId: string | null }[];
      };
      return { owner: view.owner, jobId: view.allocations.at(-1)?.backendJobId ?? "" };
    };
    const submitted = await ok("submit", "--profile", "mine", "--json", "--", "id", "-u");
    const batch = (JSON.parse(submitted) as { id: string }).id;
    const started = await ok("session", "start", "--profile", "mine", "--json");
    const session = (JSON.parse(started) as { id: string }).id;
    const waited = await run("wait", batch, "--until", "TERMINAL", "--timeout", "90");
    const logs = await run("logs", batch);
    await ok("wait", session, "--until", "READY", "--timeout", "90");
    const cell = await run("exec", session, "import os; print(os.getuid(), os.getgid())");
    const batchJob = await jobOf(batch);
    const sessionJob = await jobOf(session);
    await run("cancel", session);
    return {
      batch: {
        ended: waited.code,
        stdout: logs.out.trim(),
        owner: batchJob.owner,
        sacct: await sacctUid(batchJob.jobId, who.uid),
      },
      session: {
        cell: cell.out.trim(),
        owner: sessionJob.owner,
        sacct: await sacctUid(sessionJob.jobId, who.uid),
      },
    };
  }

  const expected = (who: OwnerAccount) => ({
    batch: { ended: 0, stdout: String(who.uid), owner: who.user, sacct: String(who.uid) },
    session: { cell: `${who.uid} ${who.gid}`, owner: who.user, sacct: String(who.uid) },
  });

  test("Ann by OIDC and Ben by MUNGE: each one's batch job and session are theirs in sacct", async () => {
    const jwt = await issuer.sign({ sub: "ann-0001", preferred_username: ann.user }, Date.now());
    const clientToml = join(scratch, "client.toml");
    writeFileSync(
      clientToml,
      `socket = "${usersSocket}"\nmunge = true\nmunge_socket = "${mungeSocket}"\n`,
      { mode: 0o644 },
    );
    const [annSaw, benSaw] = await Promise.all([
      stage(ann, { OPENAI4S_SERVER: tcp, OPENAI4S_TOKEN: jwt }),
      stage(ben, { OPENAI4S_CLIENT_CONFIG: clientToml }),
    ]);
    if (extrausersConfigured()) {
      expect(readFileSync("/etc/passwd", "utf8")).not.toContain(ben.user);
    }
    expect(annSaw).toEqual(expected(ann));
    expect(benSaw).toEqual(expected(ben));
  }, 240_000);
});
