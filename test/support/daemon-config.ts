import { writeFileSync } from "node:fs";
/**
 * The one builder of an in-process daemon's config for tests (it was copied into seven
 * files, and a new DaemonConfig field meant seven edits). The local backend by default; the
 * real test cluster's Slurm backend with `clusterDaemonConfig`.
 */
import { join } from "node:path";
import {
  type DaemonConfig,
  type RunningDaemon,
  startDaemon,
} from "../../src/apps/daemon/daemon.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { memoryLog, silentLog } from "../../src/lib/log.ts";
import { selfCommand } from "../../src/lib/self-command.ts";
import type { TestCluster } from "./slurm-cluster-config.ts";

/** The local backend, the API on `STATE/api.sock`, a 100 ms tick. */
export function localDaemonConfig(
  stateDir: string,
  overrides: Partial<DaemonConfig> = {},
): DaemonConfig {
  return {
    stateDir,
    listen: [{ kind: "unix", path: join(stateDir, "api.sock") }],
    backend: "local",
    clusterConfigPath: null,
    version: "0.0.0-test",
    // No cgroups: jobs an in-process test leaves running would leave theirs in the host's
    // hierarchy. Per-job cgroups are tested through the binary (test/local/limits-*.ts).
    env: { PATH: process.env["PATH"], OPENAI4S_CGROUP_ROOT: "off" },
    selfCommand: selfCommand(),
    clock: systemClock,
    log: memoryLog(),
    pacing: { minIntervalMs: 100, maxIntervalMs: 100 },
    ...overrides,
  };
}

/**
 * The Slurm backend on the real test cluster: state and spool in `dir` (the nodes of the test
 * cluster are this machine, so any spool is "shared"), the API on `socket`, a 250 ms tick.
 */
export function clusterDaemonConfig(
  cluster: TestCluster,
  options: { readonly dir: string; readonly socket: string; readonly clusterConfigPath: string },
  overrides: Partial<DaemonConfig> = {},
): DaemonConfig {
  return {
    stateDir: join(options.dir, "state"),
    spoolDir: join(options.dir, "spool"),
    listen: [{ kind: "unix", path: options.socket }],
    backend: "slurm",
    clusterConfigPath: options.clusterConfigPath,
    version: "test",
    env: { PATH: cluster.path, SLURM_CONF: cluster.slurmConf },
    selfCommand: [process.execPath, join(import.meta.dir, "../../src/main.ts")],
    clock: systemClock,
    log: silentLog,
    pacing: { minIntervalMs: 250, maxIntervalMs: 250 },
    ...overrides,
  };
}

/** Starts the daemon, or throws saying why it did not start. */
export async function startedDaemon(config: DaemonConfig): Promise<RunningDaemon> {
  const started = await startDaemon(config);
  if (started.kind !== "Started") throw new Error(`daemon: ${started.kind}: ${started.message}`);
  return started.daemon;
}

/** The one-CPU BATCH profile the cluster daemon tests run on. */
const SMALL_CLUSTER_TOML = [
  "[profiles.small]",
  'description = "one CPU"',
  'partition = "debug"',
  "cpus = 1",
  "memory_mb = 50",
  "time_limit_minutes = 10",
  "allow_batch = true",
  "",
].join("\n");

/** Writes `cluster.toml` with the small profile into `dir`; returns its path. */
export function writeSmallClusterConfig(dir: string): string {
  const path = join(dir, "cluster.toml");
  writeFileSync(path, SMALL_CLUSTER_TOML);
  return path;
}
