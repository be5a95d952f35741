/**
 * Containment through the built binary on the local backend, attacked from inside: code in a
 * session and in a BATCH job tries each way out that worked before (uid 0, capabilities,
 * /proc/sys, /etc/shadow, a sibling's workspace and credential, signalling host processes,
 * LD_PRELOAD/BASH_ENV through `env`), and every attempt must fail. The daemon runs as root
 * here (as on these machines), so each workload's jobs must run as a uid leased to it
 * alone; on the real Slurm test cluster too when OPENAI4S_SLURM_TEST_DIR names one. A second daemon runs as an unprivileged uid,
 * where jobs keep that uid inside a user namespace.
 * Each expectation was seen failing against the previous command line (uid 0, all of /etc,
 * /proc/sys writable, the job's env given to the host-side bwrap).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  type Daemon,
  ensureBuilt,
  startDaemon,
  type WorkloadView,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const TIMEOUT_MS = 90_000;
/** A root daemon's default lease range (systemd's DynamicUser block). */
const LEASED = { first: 61184, last: 65519 };
const IS_ROOT = process.getuid?.() === 0;

/**
 * The attacker's script: prints one JSON line of what it could do. `siblings` are paths of
 * another allocation it must not reach; `hostPids` processes it must not signal.
 */
function attack(siblings: readonly string[], hostPids: readonly number[]): string {
  return `
import os, json
r = {}
r['uid'] = [os.getuid(), os.geteuid()]
r['gid'] = [os.getgid(), os.getegid()]
status = open('/proc/self/status').read().splitlines()
r['caps'] = sorted(set(l.split()[1] for l in status if l.startswith('Cap')))
r['nnp'] = [l.split()[1] for l in status if l.startswith('NoNewPrivs')]
writable = []
for top in ('/proc/sys', '/sys'):
    seen = 0
    for root, dirs, files in os.walk(top):
        for f in files:
            seen += 1
            if seen > 20000:
                break
            p = os.path.join(root, f)
            try:
                fd = os.open(p, os.O_WRONLY)
                os.close(fd)
                writable.append(p)
            except OSError:
                pass
r['writable'] = writable[:10]
def readable(p):
    try:
        with open(p, 'rb') as f:
            f.read(1)
        return True
    except OSError:
        return False
r['shadow'] = readable('/etc/shadow') or os.path.exists('/etc/shadow')
r['gshadow'] = os.path.exists('/etc/gshadow') or os.path.exists('/etc/sudoers')
r['siblings'] = [p for p in ${JSON.stringify(siblings)} if os.path.exists(p) or readable(p)]
signalled = []
for pid in ${JSON.stringify(hostPids)}:
    try:
        os.kill(pid, 0)
        signalled.append(pid)
    except OSError:
        pass
r['signalled'] = signalled
with open('attack-wrote-here', 'w') as f:
    f.write('ok')
print(json.dumps(r))
`;
}

/** The uid a root daemon leased to this workload: its workspace's owner, in the range. */
function leasedUid(d: Daemon, workloadId: string): number {
  const uid = statSync(join(`${d.stateDir}-spool`, "workloads", workloadId, "workspace")).uid;
  expect(uid).toBeGreaterThanOrEqual(LEASED.first);
  expect(uid).toBeLessThanOrEqual(LEASED.last);
  return uid;
}

function expectContained(report: Record<string, unknown>, uid: number): void {
  expect(report).toEqual({
    uid: [uid, uid],
    gid: [uid, uid],
    caps: ["0000000000000000"],
    nnp: ["1"],
    writable: [],
    shadow: false,
    gshadow: false,
    siblings: [],
    signalled: [],
  });
}

async function startSession(d: Daemon, profile = "default"): Promise<string> {
  const r = await d.cli("session", "start", "--profile", profile);
  if (r.code !== 0) throw new Error(`session start failed (${r.code}): ${r.stderr}\n${d.log()}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
  const w = await d.cli("wait", id, "--until", "READY", "--timeout", "45s");
  if (w.code !== 0) throw new Error(`wait READY failed: ${w.stdout}${w.stderr}\n${d.log()}`);
  return id;
}

async function exec(d: Daemon, id: string, code: string): Promise<string> {
  const r = await d.cli("exec", id, code, "--json");
  const body = JSON.parse(r.stdout) as { status: string; output: string; error: string | null };
  if (body.status !== "OK") throw new Error(`exec failed: ${r.stdout}${r.stderr}`);
  return body.output;
}

async function batch(
  d: Daemon,
  profile: string,
  ...command: string[]
): Promise<{ view: WorkloadView; out: string }> {
  const r = await d.cli("submit", "--profile", profile, "--", ...command);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
  await d.cli("wait", id, "--timeout", "45s");
  const view = await d.show(id);
  const allocation = view.allocations[0];
  const log = (name: string) =>
    allocation
      ? readFileSync(
          join(`${d.stateDir}-spool`, "workloads", id, "allocations", allocation.id, name),
          "utf8",
        )
      : "";
  const out = log("stdout.log");
  // The job's own error output, on the failure the caller is about to report.
  if (view.phase !== "COMPLETED") console.error(`${id} ${view.phase}: ${log("stderr.log")}`);
  return { view, out };
}

function lastJson(text: string): Record<string, unknown> {
  const line = text.trim().split("\n").at(-1) ?? "";
  return JSON.parse(line) as Record<string, unknown>;
}

/** The other allocation's secrets: its workspace file and its worker credential. */
async function secretsOf(d: Daemon, session: string): Promise<string[]> {
  await exec(d, session, "open('mine.txt', 'w').write('theirs')");
  const allocation = (await d.show(session)).allocations[0]?.id ?? "none";
  const credential = join(
    `${d.stateDir}-spool`,
    "workloads",
    session,
    "allocations",
    allocation,
    "credentials",
    "rank-0.cred",
  );
  const workspaceFile = join(`${d.stateDir}-spool`, "workloads", session, "workspace", "mine.txt");
  // The experiment is live: both exist on the host.
  expect(statSync(credential).isFile()).toBe(true);
  expect(readFileSync(workspaceFile, "utf8")).toBe("theirs");
  return [
    workspaceFile,
    credential,
    join(d.stateDir, "admin-token"),
    join(d.stateDir, "signing-key"),
    join(d.stateDir, "openai4s.db"),
  ];
}

async function post(d: Daemon, body: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch("http://localhost/v1/workloads", {
    unix: d.socket,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, text: await response.text() };
}

/** The attacks from a session and a BATCH job, against a root daemon on one backend. */
function containedAsNobody(
  backend: string,
  start: () => Promise<Daemon>,
  profile: string,
  stopped: () => void = () => {},
): void {
  describe(`a root daemon on ${backend}: each workload runs as its own leased uid, contained`, () => {
    let d: Daemon;

    beforeAll(async () => {
      ensureBuilt();
      d = await start();
    }, 180_000);

    afterAll(async () => {
      stopped();
      await d?.stop();
    }, 60_000);

    test(
      "from a session: every way out fails, and exec keeps state",
      async () => {
        const mine = await startSession(d, profile);
        const other = await startSession(d, profile);
        const siblings = await secretsOf(d, other);
        expect(await exec(d, mine, "x = 41")).toBe("");
        expect((await exec(d, mine, "x + 1")).trim()).toBe("42");
        const attacked = await exec(d, mine, attack(siblings, [d.proc.pid, process.pid, 1]));
        const uid = leasedUid(d, mine);
        // Each workload its own uid: the other session's files are a stranger's too.
        expect(leasedUid(d, other)).not.toBe(uid);
        expectContained(lastJson(attacked), uid);
        const wrote = join(
          `${d.stateDir}-spool`,
          "workloads",
          mine,
          "workspace",
          "attack-wrote-here",
        );
        expect(statSync(wrote).uid).toBe(uid);
        // A step run inside the session's allocation (`/tasks`) is contained the same way.
        const step = await fetch(`http://localhost/v1/workloads/${mine}/tasks`, {
          unix: d.socket,
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            command: ["python3", "-c", attack(siblings, [d.proc.pid, process.pid, 1])],
          }),
        });
        const stepBody = (await step.json()) as { exitCode: number; stdout: string };
        expect(stepBody.exitCode).toBe(0);
        expectContained(lastJson(stepBody.stdout), uid);
      },
      TIMEOUT_MS,
    );

    test(
      "from a BATCH job: every way out fails, and it still writes its workspace",
      async () => {
        const other = await startSession(d, profile);
        const siblings = await secretsOf(d, other);
        const script = attack(siblings, [d.proc.pid, process.pid, 1]);
        const { view, out } = await batch(d, profile, "python3", "-c", script);
        expect(view.phase).toBe("COMPLETED");
        const uid = leasedUid(d, view.id);
        expect(leasedUid(d, other)).not.toBe(uid);
        expectContained(lastJson(out), uid);
        const wrote = join(
          `${d.stateDir}-spool`,
          "workloads",
          view.id,
          "workspace",
          "attack-wrote-here",
        );
        expect(readFileSync(wrote, "utf8")).toBe("ok");
        expect(statSync(wrote).uid).toBe(uid);
      },
      TIMEOUT_MS,
    );

    test("LD_PRELOAD and BASH_ENV through env are refused at admission, naming the key", async () => {
      for (const kind of ["BATCH", "SESSION"] as const) {
        for (const key of ["LD_PRELOAD", "BASH_ENV", "PYTHONSTARTUP"]) {
          const r = await post(d, {
            kind,
            profile,
            ...(kind === "BATCH" ? { command: ["true"] } : {}),
            env: { [key]: "/tmp/evil.so" },
          });
          expect(r.status).toBe(400);
          expect(r.text).toContain(`env.${key}`);
          expect(r.text).toContain(`${key} is refused`);
        }
      }
    });
  });
}

if (IS_ROOT) {
  containedAsNobody(
    "the local backend",
    () => startDaemon({ env: { PATH: "/usr/local/bin:/usr/bin:/bin" } }),
    "default",
  );
}

const SLURM_TOML = `[profiles.one]
description = "One node"
partition = "debug"
nodes = 1
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = true
`;

if (IS_ROOT && testCluster !== null) {
  const cluster = testCluster;
  const scratch = makeTempDir("o4s-slurm-containment-");
  const config = join(scratch, "cluster.toml");
  writeFileSync(config, SLURM_TOML);
  containedAsNobody(
    "the slurm backend",
    async () => {
      const d = await startDaemon({
        args: ["--backend", "slurm", "--cluster-config", config],
        env: {
          SLURM_CONF: cluster.slurmConf,
          PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        },
        startTimeoutMs: 120_000,
      });
      // Verification runs in the background: sessions are admitted once the probe passed.
      await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
        what: "session isolation verified on the nodes",
        timeoutMs: 120_000,
      });
      return d;
    },
    "one",
    () => removeDir(scratch),
  );
}

describe.if(IS_ROOT)("a daemon that is not root: jobs keep its uid, contained", () => {
  const UID = 4242;
  let d: Daemon;

  beforeAll(async () => {
    ensureBuilt();
    d = await startDaemon({
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/nonexistent" },
      daemonUid: UID,
    });
  }, 120_000);

  afterAll(async () => {
    await d?.stop();
  });

  test(
    "a session becomes READY, keeps state, and cannot get out; BATCH too",
    async () => {
      const mine = await startSession(d);
      const other = await startSession(d);
      const siblings = await secretsOf(d, other);
      expect(await exec(d, mine, "x = 41")).toBe("");
      expect((await exec(d, mine, "x + 1")).trim()).toBe("42");
      // Not 1: inside, that is the sandbox's own init, of the same (unprivileged) uid.
      const hostPids = [d.proc.pid, process.pid];
      expectContained(lastJson(await exec(d, mine, attack(siblings, hostPids))), UID);
      const { view, out } = await batch(d, "default", "python3", "-c", attack(siblings, hostPids));
      expect(view.phase).toBe("COMPLETED");
      expectContained(lastJson(out), UID);
    },
    TIMEOUT_MS,
  );
});

describe.if(IS_ROOT)("sessions wait while an unsandboxed allocation is live", () => {
  test(
    "a BATCH job launched without the sandbox blocks SESSION admission, by id, until it ends",
    async () => {
      // First life: bubblewrap "missing", so BATCH runs unsandboxed (as its leased uid).
      const first = await startDaemon({
        env: { PATH: "/usr/local/bin:/usr/bin:/bin", OPENAI4S_BWRAP: "/nonexistent/bwrap" },
      });
      let second: Daemon | null = null;
      try {
        // Unsandboxed, BATCH still runs: never as root, its variables set.
        const plain = await first.cli(
          "submit",
          "--env",
          "FOO=bar",
          "--",
          "sh",
          "-c",
          'id -u; echo "$FOO"',
        );
        const plainId = plain.stdout.trim().split(/\s+/).at(-1) ?? "";
        await first.cli("wait", plainId, "--timeout", "30s");
        const plainView = await first.show(plainId);
        const allocationDir = join(
          `${first.stateDir}-spool`,
          "workloads",
          plainId,
          "allocations",
          plainView.allocations[0]?.id ?? "none",
        );
        expect(readFileSync(join(allocationDir, "stdout.log"), "utf8")).toBe(
          `${leasedUid(first, plainId)}\nbar\n`,
        );
        const r = await first.cli("submit", "--", "sleep", "120");
        const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
        await first.cli("wait", id, "--until", "RUNNING", "--timeout", "30s");
        const allocation = (await first.show(id)).allocations[0]?.id ?? "";
        expect(allocation).not.toBe("");
        first.proc.kill("SIGTERM");
        await first.proc.exited;
        // Second life, same state dir, bubblewrap back: the old job still runs outside it.
        second = await startDaemon({
          env: { PATH: "/usr/local/bin:/usr/bin:/bin" },
          stateDir: first.stateDir,
        });
        const refused = await post(second, { kind: "SESSION", profile: "default" });
        expect(refused.status).toBe(409);
        expect(refused.text).toContain("ISOLATION_UNAVAILABLE");
        expect(refused.text).toContain(allocation);
        await second.cli("cancel", id);
        await second.cli("wait", id, "--timeout", "30s");
        const admitted = await post(second, { kind: "SESSION", profile: "default" });
        expect(admitted.status).toBe(201);
      } finally {
        await second?.stop();
        await first.stop();
      }
    },
    TIMEOUT_MS,
  );
});
