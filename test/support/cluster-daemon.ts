/**
 * The setup the in-process daemon tests on the real test cluster (test/slurm/*.cluster.test.ts)
 * share: a temp dir with a cluster config, a daemon started on it with its API on a unix
 * socket, a client for that socket, waiting for a phase, and the teardown (the test's own
 * cleanup, then the daemon stopped, then the dir removed). Each file used to write it out
 * again, so a change to how a test daemon is set up had to be made in every copy.
 */
import { afterAll, beforeAll } from "bun:test";
import { copyFileSync, existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DaemonConfig, RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import { clusterDaemonConfig, startedDaemon, writeSmallClusterConfig } from "./daemon-config.ts";
import type { TestCluster } from "./slurm-cluster-config.ts";
import { type SocketApi, socketApi } from "./socket-api.ts";
import { makeTempDir, removeDir } from "./temp-dir.ts";

export { type ApiAnswer, type SocketApi, socketApi, waitForPhase } from "./socket-api.ts";

/** A one-CPU BATCH profile whose jobs run as their owners (`run_as = "owner"`). */
export function ownerProfileToml(name: string, description: string): string {
  return [
    `[profiles.${name}]`,
    `description = "${description}"`,
    'partition = "debug"',
    "cpus = 1",
    "memory_mb = 50",
    "time_limit_minutes = 10",
    "allow_batch = true",
    'run_as = "owner"',
    "",
  ].join("\n");
}

/** The owner-mode profile the tests submit to: `mine`. */
export const OWNER_PROFILE_TOML = ownerProfileToml("mine", "one CPU, as its owner");

export interface ClusterDaemon {
  readonly dir: string;
  readonly socket: string;
  readonly daemon: RunningDaemon;
  readonly api: SocketApi;
}

export interface ClusterDaemonOptions {
  /** The cluster config's text; default: the one-CPU `small` BATCH profile. */
  readonly toml?: string;
  /** Environment added to the daemon's (PATH and SLURM_CONF are the cluster's). */
  readonly env?: Readonly<Record<string, string>>;
  /** Also listen on TCP (127.0.0.1, any port: tcpBase), for requests with a principal's token. */
  readonly tcp?: boolean;
  /** Anything else of the daemon's config. */
  readonly overrides?: (dir: string) => Partial<DaemonConfig>;
  /** Runs before the daemon is stopped (cancel the jobs the test started by hand). */
  readonly cleanup?: () => void | Promise<void>;
}

/**
 * One daemon on the test cluster for the enclosing describe block: started in its
 * beforeAll, stopped in its afterAll. Call it at describe level (where the hooks belong);
 * read the fields in the tests.
 */
export function clusterDaemonForBlock(
  cluster: TestCluster,
  prefix: string,
  options: ClusterDaemonOptions = {},
): ClusterDaemon {
  let started: ClusterDaemon | null = null;
  let dir: string | null = null;
  beforeAll(async () => {
    dir = makeTempDir(prefix);
    const socket = join(dir, "api.sock");
    const daemon = await startedDaemon(clusterDaemonFor(cluster, dir, socket, options));
    started = { dir, socket, daemon, api: socketApi(socket) };
  }, 60_000);
  afterAll(async () => {
    try {
      await options.cleanup?.();
    } finally {
      await started?.daemon.stop();
      if (dir !== null) removeDir(dir);
    }
  }, 60_000);
  const get = (): ClusterDaemon => {
    if (started === null) throw new Error("the cluster daemon is not started (beforeAll failed)");
    return started;
  };
  return {
    get dir() {
      return get().dir;
    },
    get socket() {
      return get().socket;
    },
    get daemon() {
      return get().daemon;
    },
    api: (method, path, body) => get().api(method, path, body),
  };
}

/** The config of a daemon on the test cluster with its state, spool and config in `dir`. */
export function clusterDaemonFor(
  cluster: TestCluster,
  dir: string,
  socket: string,
  options: Omit<ClusterDaemonOptions, "cleanup"> = {},
): DaemonConfig {
  let clusterConfigPath: string;
  if (options.toml === undefined) {
    clusterConfigPath = writeSmallClusterConfig(dir);
  } else {
    clusterConfigPath = join(dir, "cluster.toml");
    writeFileSync(clusterConfigPath, options.toml);
  }
  const base = { PATH: cluster.path, SLURM_CONF: cluster.slurmConf };
  const tcp = { kind: "tcp", host: "127.0.0.1", port: 0 } as const;
  return clusterDaemonConfig(
    cluster,
    { dir, socket, clusterConfigPath },
    {
      env: { ...base, ...options.env },
      ...(options.tcp === true ? { listen: [{ kind: "unix", path: socket }, tcp] } : {}),
      ...options.overrides?.(dir),
    },
  );
}

/** `http://HOST:PORT` of a daemon started with `tcp: true`. */
export function tcpBase(daemon: RunningDaemon): string {
  const tcp = daemon.listening.find((l) => !l.startsWith("unix:"));
  if (tcp === undefined) throw new Error("the daemon listens on no TCP address");
  return `http://${tcp}`;
}

const STORE_FILES = ["openai4s.db", "openai4s.db-wal", "openai4s.db-shm"];

/** Copies a stopped daemon's store (with its WAL) to `backupDir`: last night's backup. */
export function backUpStore(stateDir: string, backupDir: string): void {
  for (const name of STORE_FILES) {
    const from = join(stateDir, name);
    if (existsSync(from)) copyFileSync(from, join(backupDir, name));
  }
}

/** Puts a backup taken by backUpStore back in place of a stopped daemon's store. */
export function restoreStore(backupDir: string, stateDir: string): void {
  for (const name of STORE_FILES) {
    const target = join(stateDir, name);
    rmSync(target, { force: true });
    const from = join(backupDir, name);
    if (existsSync(from)) copyFileSync(from, target);
  }
}
