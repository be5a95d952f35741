/**
 * A path that leaks into one allocation still cannot read another's files (issue 18): a root
 * daemon runs each workload as a uid of its own, so the kernel's permission check stands
 * behind the sandbox's namespaces. Shown where nothing else stands in the way: bubblewrap
 * made unavailable, so job B sees the host's paths and /proc, and is given job A's
 * workspace path and pid. Every way to A's 0600 file must be refused. On the local backend,
 * and on the real Slurm test cluster when OPENAI4S_SLURM_TEST_DIR names one (there the
 * numeric uid has no passwd entry: the batch script drops to it, as --run-as does).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const NO_BWRAP = {
  PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
  OPENAI4S_BWRAP: "/nonexistent/bwrap",
};

/** Tries each way to A's secret; prints one JSON line: path -> what it got. */
const READER = `
import json, os, sys
ws, pid = sys.argv[1], sys.argv[2]
paths = [
  os.path.join(ws, 'secret'),
  f'/proc/{pid}/cwd/secret',
  f'/proc/{pid}/root' + os.path.join(ws, 'secret'),
  f'/proc/{pid}/environ',
]
out = {}
for p in paths:
    try:
        with open(p) as f:
            out[p] = f.read()
    except OSError as e:
        out[p] = type(e).__name__
try:
    out['list'] = os.listdir(ws)
except OSError as e:
    out['list'] = type(e).__name__
out['uid'] = os.getuid()
print(json.dumps(out))
`;

async function submit(d: Daemon, profile: string, ...command: string[]): Promise<string> {
  const r = await d.cli("submit", "--profile", profile, "--", ...command);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  return r.stdout.trim().split(/\s+/).at(-1) ?? "";
}

function spoolOf(d: Daemon, id: string): { workspace: string; allocations: string } {
  const w = join(`${d.stateDir}-spool`, "workloads", id);
  return { workspace: join(w, "workspace"), allocations: join(w, "allocations") };
}

function separated(
  backend: string,
  start: () => Promise<Daemon>,
  profile: string,
  done = () => {},
) {
  describe(`a root daemon without a sandbox on ${backend}: one uid per workload`, () => {
    let d: Daemon;

    beforeAll(async () => {
      ensureBuilt();
      d = await start();
    }, 180_000);

    afterAll(async () => {
      await d?.stop();
      done();
    });

    test("job B, given job A's paths and pid, reads none of A's files", async () => {
      const a = await submit(
        d,
        profile,
        "sh",
        "-c",
        "umask 077; echo s3cret > secret; echo $$; exec sleep 60",
      );
      await d.cli("wait", a, "--until", "RUNNING", "--timeout", "90s");
      const aDirs = spoolOf(d, a);
      const allocation = (await d.show(a)).allocations[0]?.id ?? "";
      const aStdout = join(aDirs.allocations, allocation, "stdout.log");
      const pid = await eventually(
        () => {
          try {
            return readFileSync(aStdout, "utf8").trim() || null;
          } catch {
            return null;
          }
        },
        { what: "job A's pid", timeoutMs: 60_000 },
      );
      const aUid = statSync(aDirs.workspace).uid;
      expect(readFileSync(join(aDirs.workspace, "secret"), "utf8")).toBe("s3cret\n");
      expect(statSync(aDirs.workspace).mode & 0o777).toBe(0o700);

      const b = await submit(d, profile, "python3", "-c", READER, aDirs.workspace, pid);
      expect((await d.cli("wait", b, "--timeout", "90s")).code).toBe(0);
      const report = JSON.parse((await d.cli("logs", b)).stdout.trim().split("\n").at(-1) ?? "{}");
      expect(report.uid).not.toBe(aUid);
      expect(report.uid).toBe(statSync(spoolOf(d, b).workspace).uid);
      for (const [path, got] of Object.entries(report)) {
        if (path === "uid") continue;
        expect({ path, got }).toEqual({ path, got: "PermissionError" });
      }
      const diagnostics = await fetch("http://localhost/v1/diagnostics", { unix: d.socket });
      const isolation = ((await diagnostics.json()) as { isolation: { jobIdentity: string } })
        .isolation;
      expect(isolation.jobIdentity).toContain("leased from 61184-65519");
      await d.cli("cancel", a);
    }, 240_000);
  });
}

if (IS_ROOT) {
  separated("the local backend", () => startDaemon({ env: NO_BWRAP, gateway: false }), "default");
}

if (IS_ROOT && testCluster !== null) {
  const cluster = testCluster;
  const scratch = makeTempDir("o4s-slurm-uid-separation-");
  const config = join(scratch, "cluster.toml");
  writeFileSync(
    config,
    '[profiles.one]\ndescription = "One node"\npartition = "debug"\nnodes = 1\ncpus = 1\ntime_limit_minutes = 10\nallow_batch = true\n',
  );
  separated(
    "the slurm backend",
    () =>
      startDaemon({
        args: ["--backend", "slurm", "--cluster-config", config],
        env: { ...NO_BWRAP, SLURM_CONF: cluster.slurmConf },
        gateway: false,
        startTimeoutMs: 120_000,
      }),
    "one",
    () => removeDir(scratch),
  );
}
