/**
 * Issue 33, on the REAL cluster through the built binary: a restore onto a fresh state dir
 * (a new machine) hid a job submitted after the backup. `openai4s backup` named signing-key
 * and admin-token but not the owner id; restored with those, the daemon made a new owner id,
 * the job ran on and the orphan sweep reported nothing; and the summary said "live
 * attempts: 0" while one ran. Here, as the docs say: back up, keep what the backup names,
 * submit a job after it, stop the daemon, restore onto a fresh state dir with the kept
 * files, start: the summary counts the copy's two live attempts (one on its last try), the
 * copy's jobs are running again under the restored daemon, and the sweep names the later
 * job (policy report, the default) in /v1/diagnostics and the log.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { BINARY, type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { socketApi } from "../support/cluster-daemon.ts";
import { writeSmallClusterConfig } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { adminCommand, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;

interface KeptFile {
  readonly name: string;
  readonly path: string;
}

describe.skipIf(testCluster === null || !IS_ROOT)(
  "slurm-cluster: restore onto a fresh state dir",
  () => {
    const cluster = testCluster as TestCluster;
    let root: string | null = null;
    const daemons: Daemon[] = [];

    afterAll(async () => {
      for (const d of daemons) await d.stop();
      if (root !== null) {
        const dir = root;
        const ours = adminCommand(cluster, "squeue", "-h", "-o", "%i %Z")
          .split("\n")
          .filter((l) => l.includes(dir))
          .map((l) => l.split(" ")[0] ?? "");
        if (ours.length > 0) adminCommand(cluster, "scancel", ...ours);
        removeDir(dir);
      }
    }, 60_000);

    test("the job submitted after the backup is named; the summary counts the live attempts", async () => {
      ensureBuilt();
      root = makeTempDir("o4s-slurm-restore-fresh-");
      const dir = root;
      const config = writeSmallClusterConfig(dir);
      const start = async (stateDir: string) => {
        const d = await startDaemon({
          args: ["--backend", "slurm", "--cluster-config", config],
          env: {
            SLURM_CONF: cluster.slurmConf,
            PATH: cluster.path,
            OPENAI4S_ORPHAN_SWEEP_SECONDS: "1",
          },
          stateDir,
          spoolDir: join(dir, "spool"),
          gateway: false,
          startTimeoutMs: 60_000,
        });
        daemons.push(d);
        return d;
      };
      const running = async (d: Daemon, ...flags: string[]) => {
        const r = await d.cli("submit", "--profile", "small", ...flags, "--", "/bin/sleep", "300");
        expect(r.stderr).toBe("");
        const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
        const view = await eventually(
          async () => {
            const w = await d.show(id);
            return w.phase === "RUNNING" ? w : null;
          },
          { what: `${id} RUNNING`, timeoutMs: 30_000, intervalMs: 250 },
        );
        const handle = (view.allocations.at(-1) as { backendJobId?: string }).backendJobId;
        return { id, handle: String(handle) };
      };

      const stateA = join(dir, "a");
      const first = await start(stateA);
      // Live in the copy: one on its last (only) try, one with retries left.
      const lastTry = await running(first);
      const withRetries = await running(first, "--max-attempts", "3");
      const copy = join(dir, "copy.db");
      const backup = await first.cli("backup", copy, "--json");
      expect(backup.stderr).toBe("");
      const named = JSON.parse(backup.stdout) as {
        keepBeside: KeptFile[];
        keepBesideSecret: KeptFile[];
      };
      const after = await running(first);
      // Stopped as an admin stops it: its Slurm jobs run on.
      first.proc.kill("SIGTERM");
      await first.proc.exited;

      // The fresh state dir, with the files the backup told the admin to keep, secrets too.
      const stateB = join(dir, "b");
      const kept = [...named.keepBeside, ...named.keepBesideSecret];
      expect(kept.map((k) => k.name)).toContain("admin-token");
      for (const k of kept) {
        const target = join(stateB, relative(stateA, k.path));
        mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
        copyFileSync(k.path, target);
      }
      const restore = Bun.spawnSync([BINARY, "restore", copy, "--state-dir", stateB], {
        env: { PATH: cluster.path, HOME: dir },
      });
      const summary = restore.stdout.toString();
      expect({ code: restore.exitCode, err: restore.stderr.toString() }).toEqual({
        code: 0,
        err: "",
      });
      expect(summary).toContain("attempts live in the copy: 2");

      const restored = await start(stateB);
      for (const known of [lastTry, withRetries]) {
        expect((await restored.show(known.id)).phase).toBe("RUNNING");
      }
      // The later job: named by the sweep (report, the documented default), not left silent.
      const orphans = await eventually(
        async () => {
          const { body } = await socketApi(restored.socket)("GET", "/v1/diagnostics");
          const backend = body["backend"] as {
            orphans: { policy: string; jobs: { handle: string }[] } | null;
          };
          const found = backend.orphans;
          return found !== null && found.jobs.length > 0 ? found : null;
        },
        { what: "the orphan sweep's first report", timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(orphans.policy).toBe("report");
      expect(orphans.jobs.map((j) => j.handle)).toEqual([after.handle]);
      expect(restored.log()).toContain("jobs of this daemon with no allocation row");
      expect(restored.log()).toContain(after.handle);
      expect(adminCommand(cluster, "squeue", "-h", "-j", after.handle, "-o", "%T").trim()).toBe(
        "RUNNING",
      );
    }, 120_000);
  },
);
