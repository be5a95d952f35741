/**
 * The launch line through the built binary, with a root daemon (jobs as nobody) on the local
 * backend and on the real Slurm test cluster when OPENAI4S_SLURM_TEST_DIR names one, and with
 * an unprivileged daemon on the local backend (jobs keep its uid, in a user namespace):
 *  - the reproductions, as steps (`POST /v1/workloads/{id}/tasks`) of a running BATCH
 *    job: argv[0] through a symlink the job planted must not bind the host's /proc or /etc,
 *    and a path below a 0700 host directory must not become readable;
 *  - an absolute argv[0] into a subdirectory of the job's own workspace runs (it was 126),
 *    and one into another workload's workspace finds nothing there (it was bound);
 *  - the science smoke suite inside the sandbox: multiprocessing.Pool, ProcessPoolExecutor,
 *    HTTPS verified against the system CA store, a matplotlib figure, UTF-8 as Python's
 *    preferred encoding, the CA bundle, time zone and locale files readable.
 * Each was seen failing against the previous launch line with a root daemon (local and
 * Slurm); with an unprivileged daemon the /proc, /etc and 0700 reproductions were (the rest
 * held there already: its user namespace owns /dev/shm).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";
import { installTestCa, type TestCa } from "../support/test-ca.ts";

const TIMEOUT_MS = 120_000;
const IS_ROOT = process.getuid?.() === 0;
const PYTHON = "/usr/bin/python3";
/** The default block a root daemon leases job uids from (--uid-range). */
const LEASED_FIRST = 61184;
const LEASED_LAST = 65519;
const DAEMON_UID = 4242;
/** Deeper than any cwd the daemon runs in: the lexical `..` climb then ends at `/`. */
const SYMLINK_DEPTH = 14;

if (!IS_ROOT) console.log("launch-line tests skipped: they need a root daemon (run as root)");

type TaskAnswer = { readonly exitCode: number; readonly stdout: string; readonly stderr: string };

async function task(d: Daemon, id: string, command: readonly string[]): Promise<TaskAnswer> {
  const response = await fetch(`http://localhost/v1/workloads/${id}/tasks`, {
    unix: d.socket,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ command, timeoutSeconds: 60 }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`task failed (${response.status}): ${text}`);
  return JSON.parse(text) as TaskAnswer;
}

function idOf(stdout: string): string {
  return stdout.trim().split(/\s+/).at(-1) ?? "";
}

/** A file the job's uid may run: what the job itself would have written. */
function plantScript(path: string, body: string): void {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
}

/**
 * `x -> d1/d2/.../dN` and a script at `d1/<tail>`: inside, `x/../../..(N-1 times)/<tail>`
 * is the job's own script; resolved lexically on the host it is `/<tail>`.
 */
function plantClimb(workspace: string, tail: string, body: string): string {
  const chain = Array.from({ length: SYMLINK_DEPTH }, (_, i) => `d${i + 1}`);
  mkdirSync(join(workspace, ...chain), { recursive: true, mode: 0o755 });
  mkdirSync(join(workspace, "d1", tail, ".."), { recursive: true, mode: 0o755 });
  plantScript(join(workspace, "d1", tail), body);
  try {
    symlinkSync(chain.join("/"), join(workspace, "x"));
  } catch {
    // Planted by an earlier test of this file.
  }
  return `x/${"../".repeat(SYMLINK_DEPTH - 1)}${tail}`;
}

/** Host files a job reads through the /etc allowlist (each checked when the host has it). */
const ETC_FILES = [
  "/etc/ssl/certs/ca-certificates.crt",
  "/etc/localtime",
  "/etc/timezone",
  "/etc/default/locale",
  "/etc/passwd",
  "/etc/hosts",
  "/etc/resolv.conf",
  "/etc/python3/sitecustomize.py",
];

const SMOKE = `
import concurrent.futures, json, locale, multiprocessing, os, sys, urllib.request
def square(x):
    return x * x
if __name__ == '__main__':
    r = {}
    with multiprocessing.Pool(2) as pool:
        r['pool'] = pool.map(square, range(5))
    with concurrent.futures.ProcessPoolExecutor(2) as ex:
        r['executor'] = list(ex.map(square, range(5)))
    with urllib.request.urlopen(sys.argv[1], timeout=20) as response:
        r['https'] = response.read().decode()
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    plt.plot([0, 1, 2], [0, 1, 4])
    plt.savefig('figure.png')
    r['figure'] = os.path.getsize('figure.png') > 1000
    r['encoding'] = locale.getpreferredencoding()
    r['home_writable'] = os.access(os.environ['HOME'], os.W_OK)
    unreadable = []
    for path in json.loads(sys.argv[2]):
        try:
            with open(path, 'rb') as f:
                f.read(1)
        except OSError as e:
            unreadable.append(f'{path}: {e}')
    r['etc_unreadable'] = unreadable
    print(json.dumps(r))
`;

function launchLine(
  where: string,
  start: () => Promise<Daemon>,
  profile: string,
  /** The uid the job runs as; "leased": a root daemon's uid for this workload (its workspace's owner). */
  expectedUid: number | "leased",
  daemonUid: number,
  stopped: () => void = () => {},
): void {
  describe(`${where}: the launch line`, () => {
    let d: Daemon;
    let job = "";
    let workspace = "";
    let ca: TestCa | null = null;
    let jobUid = -1;

    beforeAll(async () => {
      ensureBuilt();
      d = await start();
      const r = await d.cli("submit", "--profile", profile, "--", "sleep", "600");
      if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
      job = idOf(r.stdout);
      await eventually(async () => (await d.show(job)).phase === "RUNNING", {
        what: `${job} RUNNING`,
        timeoutMs: 90_000,
      });
      workspace = join(`${d.stateDir}-spool`, "workloads", job, "workspace");
      jobUid = expectedUid === "leased" ? statSync(workspace).uid : expectedUid;
      if (expectedUid === "leased" && (jobUid < LEASED_FIRST || jobUid > LEASED_LAST)) {
        throw new Error(`the workspace's owner ${jobUid} is not a leased uid`);
      }
    }, 240_000);

    afterAll(async () => {
      ca?.remove();
      if (job !== "") await d?.cli("cancel", job);
      stopped();
      await d?.stop();
    }, 60_000);

    test(
      "argv[0] through a planted symlink runs the job's script and binds no host /proc",
      async () => {
        const daemonPid = d.proc.pid;
        const argv0 = plantClimb(
          workspace,
          "proc/uptime",
          `test -d /proc/${daemonPid} && echo host-proc-visible || echo host-proc-hidden`,
        );
        const r = await task(d, job, [argv0]);
        expect({ exitCode: r.exitCode, stdout: r.stdout.trim() }).toEqual({
          exitCode: 0,
          stdout: "host-proc-hidden",
        });
      },
      TIMEOUT_MS,
    );

    test(
      "argv[0] through a planted symlink to .../etc/passwd binds no host /etc",
      async () => {
        const argv0 = plantClimb(
          workspace,
          "etc/passwd",
          "test -e /etc/shadow && echo shadow-visible || echo shadow-absent",
        );
        const r = await task(d, job, [argv0]);
        expect({ exitCode: r.exitCode, stdout: r.stdout.trim() }).toEqual({
          exitCode: 0,
          stdout: "shadow-absent",
        });
      },
      TIMEOUT_MS,
    );

    test(
      "a program below the daemon's own 0700 directory stays out of reach",
      async () => {
        // Owned by the daemon's uid, like its ~/.ssh: the daemon's bwrap could bind it.
        const secret = join(d.dir, "private");
        mkdirSync(join(secret, "pub"), { recursive: true });
        chmodSync(secret, 0o700);
        chmodSync(join(secret, "pub"), 0o755);
        plantScript(join(secret, "pub", "tool"), "echo read-through-0700");
        for (const p of [secret, join(secret, "pub"), join(secret, "pub", "tool")]) {
          chownSync(p, daemonUid, daemonUid);
        }
        const r = await task(d, job, [join(secret, "pub", "tool")]);
        expect(r.stdout).not.toContain("read-through-0700");
        expect(r.exitCode).not.toBe(0);
      },
      TIMEOUT_MS,
    );

    test(
      "an absolute argv[0] into another workload's workspace is not there (nothing bound for it)",
      async () => {
        // What the daemon once did: bind argv[0]'s directory, so a path into a sibling's
        // workspace ran the sibling's program with the sibling's files beside it.
        const sibling = join(`${d.stateDir}-spool`, "workloads", "w-sibling-attack", "workspace");
        mkdirSync(sibling, { recursive: true, mode: 0o755 });
        chmodSync(join(sibling, ".."), 0o755);
        plantScript(join(sibling, "tool"), "echo ran-the-siblings-program");
        writeFileSync(join(sibling, "secret"), "sibling-secret");
        const r = await task(d, job, [join(sibling, "tool")]);
        expect(r.stdout).not.toContain("ran-the-siblings-program");
        expect(r.exitCode).toBe(127);
        const read = await task(d, job, ["cat", join(sibling, "secret")]);
        expect(read.stdout).not.toContain("sibling-secret");
        expect(read.exitCode).not.toBe(0);
      },
      TIMEOUT_MS,
    );

    test(
      "an absolute argv[0] inside the job's own workspace runs",
      async () => {
        mkdirSync(join(workspace, "bin", "sub"), { recursive: true, mode: 0o755 });
        const tool = join(workspace, "bin", "sub", "tool.sh");
        plantScript(tool, 'echo "ran $(id -u)"');
        const r = await task(d, job, [tool]);
        expect({ exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr }).toEqual({
          exitCode: 0,
          stdout: `ran ${jobUid}\n`,
          stderr: "",
        });
        // Relative names mean the workspace too, never the daemon's cwd.
        const relative = await task(d, job, ["bin/sub/tool.sh"]);
        expect(relative.stdout).toBe(`ran ${jobUid}\n`);
      },
      TIMEOUT_MS,
    );

    test(
      "science code runs: Pool, ProcessPoolExecutor, HTTPS via the system CAs, matplotlib, UTF-8",
      async () => {
        ca = installTestCa(makeTempDir("o4s-test-ca-"));
        const server = Bun.serve({
          hostname: "127.0.0.1",
          port: 0,
          tls: { cert: ca.serverCert, key: ca.serverKey },
          fetch: () => new Response("verified"),
        });
        try {
          const url = `https://127.0.0.1:${server.port}/`;
          const etc = JSON.stringify(ETC_FILES.filter((f) => existsSync(f)));
          const r = await d.cli(
            "submit",
            "--profile",
            profile,
            "--",
            PYTHON,
            "-c",
            SMOKE,
            url,
            etc,
          );
          expect(r.code).toBe(0);
          const id = idOf(r.stdout);
          await d.cli("wait", id, "--timeout", "90s");
          const view = await d.show(id);
          const allocation = view.allocations[0]?.id ?? "none";
          const logs = join(`${d.stateDir}-spool`, "workloads", id, "allocations", allocation);
          const out = readFileSync(join(logs, "stdout.log"), "utf8");
          const err = readFileSync(join(logs, "stderr.log"), "utf8");
          expect({ phase: view.phase, err }).toEqual({ phase: "COMPLETED", err: "" });
          expect(JSON.parse(out.trim().split("\n").at(-1) ?? "{}")).toEqual({
            pool: [0, 1, 4, 9, 16],
            executor: [0, 1, 4, 9, 16],
            https: "verified",
            figure: true,
            encoding: "UTF-8",
            home_writable: true,
            etc_unreadable: [],
          });
          const own = join(`${d.stateDir}-spool`, "workloads", id, "workspace");
          // The figure belongs to this workload's uid: its own lease, or the one fixed uid.
          const ownUid = expectedUid === "leased" ? statSync(own).uid : jobUid;
          expect(ownUid).not.toBe(daemonUid === 0 ? 0 : -1);
          expect(statSync(join(own, "figure.png")).uid).toBe(ownUid);
        } finally {
          server.stop(true);
        }
      },
      TIMEOUT_MS,
    );
  });
}

if (IS_ROOT) {
  launchLine(
    "a root daemon on the local backend",
    () => startDaemon({ env: { PATH: "/usr/local/bin:/usr/bin:/bin" } }),
    "default",
    "leased",
    0,
  );
  // Jobs keep the daemon's uid, in a user namespace: what they reach is the same fixed set.
  launchLine(
    "an unprivileged daemon on the local backend",
    () =>
      startDaemon({
        env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/nonexistent" },
        daemonUid: DAEMON_UID,
      }),
    "default",
    DAEMON_UID,
    DAEMON_UID,
  );
}

const SLURM_TOML = `[profiles.one]
description = "One node"
partition = "debug"
nodes = 1
cpus = 2
time_limit_minutes = 10
allow_sessions = true
allow_batch = true
`;

if (IS_ROOT && testCluster !== null) {
  const cluster = testCluster;
  const scratch = makeTempDir("o4s-slurm-launch-line-");
  const config = join(scratch, "cluster.toml");
  writeFileSync(config, SLURM_TOML);
  launchLine(
    "a root daemon on the slurm backend",
    async () => {
      const d = await startDaemon({
        args: ["--backend", "slurm", "--cluster-config", config],
        env: {
          SLURM_CONF: cluster.slurmConf,
          PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        },
        startTimeoutMs: 120_000,
      });
      // Jobs are put in the sandbox once the probe has verified it on the nodes.
      await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
        what: "session isolation verified on the nodes",
        timeoutMs: 120_000,
      });
      return d;
    },
    "one",
    "leased",
    0,
    () => removeDir(scratch),
  );
}
