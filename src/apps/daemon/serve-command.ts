/**
 * `openai4s serve`: parses flags, resolves the state dir, starts the daemon, and turns
 * SIGTERM/SIGINT into a graceful stop. Backend names come from the composition root's
 * registry, so this file names no backend beyond the default.
 */
import { homedir } from "node:os";
import { resolve } from "node:path";
import {
  chooseJobIdentity,
  type IdentityChoice,
  RUN_AS_ENV,
  systemIdentityDatabase,
  UID_RANGE_ENV,
} from "../../adapters/isolation-bwrap/run-as.ts";
import type { PrincipalLimits } from "../../core/principals.ts";
import { systemClock } from "../../lib/clock.ts";
import { type Command, type CommandIo, UsageError } from "../../lib/command/command.ts";
import { parseStrict } from "../../lib/command/parse-args.ts";
import { jsonLog, type LogLevel } from "../../lib/log.ts";
import { selfCommand } from "../../lib/self-command.ts";
import { VERSION } from "../../lib/version.ts";
import { BACKENDS, DEFAULT_BACKEND } from "./composition/index.ts";
import { startDaemon } from "./daemon.ts";
import { isLoopback, type ListenAddress, parseListenAddress } from "./listen.ts";
import { parseLowWater } from "./spool-watch.ts";
import { resolveSpoolDir, resolveStateDir } from "./state-dir.ts";

function help(): string {
  const backends = Object.entries(BACKENDS)
    .map(([name, entry]) => `                          ${name.padEnd(8)} ${entry.describe}`)
    .join("\n");
  return `Usage: openai4s serve [options]

Run the daemon: the admin API, the reconciler and (opt-in) the worker gateway.

Options:
  --state-dir DIR         Private state directory (else $OPENAI4S_STATE_DIR, else
                          $XDG_STATE_HOME/openai4s, else ~/.local/state/openai4s).
                          Created 0700; holds the database, signing key, admin token,
                          API socket, lock and job records. Keep it on local disk. The
                          daemon refuses to start (exit 2) when it, or anything in it,
                          belongs to another user, when group or other may write it,
                          or when a parent directory lets another user replace it
                          (sticky dirs such as /tmp are fine).
  --spool-dir DIR         Where jobs run: workspaces, job logs, credential files
                          (else $OPENAI4S_SPOOL_DIR, else STATE_DIR-spool beside the
                          state dir). Must not contain or be inside the state dir;
                          refused (exit 2) like the state dir when a parent lets
                          another user replace it. Required for a cluster backend:
                          a dir the nodes share.
  --spool-low-water SIZE  Below this much free space in the spool (e.g. 2G, 500M),
                          new submissions get 503 SPOOL_FULL and diagnostics say the
                          spool is unhealthy, until space returns. Default: 5% of its
                          filesystem, at most 1G; 0 turns the check off.
  --allow-network-db      Open the database even when the state dir is not on a
                          filesystem known to be local (ext2/3/4, xfs, btrfs, tmpfs,
                          zfs, f2fs, or an overlay of those); refused otherwise (NFS,
                          Lustre, CIFS, fuse.*, virtiofs...), because SQLite's WAL
                          locking does not work across hosts.
  --listen ADDR           unix:PATH or HOST:PORT; repeatable. Adds a listener beside the
                          API socket STATE_DIR/api.sock (mode 0600), which is always
                          served: the CLI and backup keep working on it. TCP listeners
                          require Authorization: Bearer TOKEN with the token in
                          STATE_DIR/admin-token (GET /healthz excepted: liveness only).
  --body-timeout-ms MS    How long any listener waits for a request's body before it
                          answers 408 and closes the connection (default 30000); for a
                          file upload, the longest pause between its chunks.
  --max-upload-size SIZE  The largest file \`PUT /v1/workloads/ID/files/PATH\` (and
                          \`openai4s cp\`) accepts, e.g. 500M or 64G (default 16G).
  --allow-remote          Allow a --listen address that is not loopback.
  --backend NAME          Where work runs (default ${DEFAULT_BACKEND}):
${backends}
  --cluster-config FILE   The cluster.toml a cluster backend reads its profiles from.
  --uid-range FIRST-LAST  When the daemon runs as root (the default there): each workload's
                          jobs, session worker and steps run as a uid of their own from this
                          range, gid alike, with no capabilities and no_new_privs; its
                          workspace (0700) is owned by it. No passwd entry is needed. A uid is
                          not leased again while a workspace it owns is still in the spool.
                          Else $OPENAI4S_UID_RANGE, else 61184-65519 (systemd's DynamicUser
                          block); 65534, 65535 and ids named in /etc/passwd or
                          /etc/group are never used.
  --run-as USER|UID[:GID] Instead of --uid-range (else $OPENAI4S_RUN_AS): one named account
                          for every job. Jobs are then kept apart by the sandbox's namespaces
                          alone. Refused if it resolves to uid 0. A daemon that is not root
                          runs jobs as its own uid, sandboxed in a user namespace (neither
                          flag then).
  --allow-unsandboxed-batch
                          Run BATCH jobs even when they would run as this daemon's own
                          uid with no verified sandbox (a daemon that is not root, where
                          bubblewrap cannot run): such a job can read the state dir,
                          database and admin token. Refused otherwise (409
                          ISOLATION_UNAVAILABLE). Logged at every start, shown in
                          /v1/diagnostics and /metrics.
  --principal-max-sessions N, --principal-max-batch N, --principal-max-cpus N,
  --principal-max-gpus N  Limits a principal gets when \`principal add\` names none (else
                          $OPENAI4S_PRINCIPAL_MAX_SESSIONS and alike; default: none).
                          Applied when the principal is added; the admin is unlimited.
  --log-level LEVEL       debug, info (default), warn or error. Logs are JSON lines on stderr.
  --poll-min-ms MS        Shortest time between two observations of the backend, however
                          often the API wakes the reconciler (default 1000).
  --poll-max-ms MS        While nothing changes the period doubles up to this (default 30000).
  --max-commands N        Submit/cancel commands in flight at most (default 4, at least 2).
  -h, --help              Show this help.

Environment:
  OPENAI4S_WORKER_LISTEN=HOST:PORT   Open the worker gateway (sessions); off when unset.
  OPENAI4S_RUN_AS=USER|UID[:GID]     As --run-as.
  OPENAI4S_UID_RANGE=FIRST-LAST      As --uid-range.
  OPENAI4S_SPOOL_DIR=DIR             The spool, when --spool-dir is not given.
  OPENAI4S_WORKER_TLS=off            The worker gateway without TLS (default: TLS, with a
                                     certificate generated into the state dir).
  OPENAI4S_WORKER_TLS_KEY=FILE, OPENAI4S_WORKER_TLS_CERT=FILE
                                     The admin's key (mode 600) and certificate instead.
  OPENAI4S_INTERRUPT_GRACE_MS=N      An interrupted cell still running N ms later costs its
                                     kernel: restarted, state lost (10000).
  OPENAI4S_WARN_MINUTES_BEFORE_LIMIT=N
                                     Local backend: a job's TIME_LIMIT_NEAR event and its
                                     SIGURG come N minutes before its time limit (5; 0: none;
                                     a cluster profile sets warn_minutes_before_limit instead).
  OPENAI4S_LOCAL_MEMORY_MB=N         Local backend: memory per job (default: 3/4 of this
                                     machine's); past it a job ends FAILED/OUT_OF_MEMORY.
  OPENAI4S_LOCAL_PIDS_MAX=N          Local backend: processes per job at once (4096).
  OPENAI4S_LOCAL_NETWORK=host|none   Local backend: none gives each job its own network
                                     namespace, loopback only (needs the sandbox).
  OPENAI4S_LOCAL_PROFILES=FILE       Local backend: its profiles from a [profiles.NAME] file
                                     (docs/operations.md) instead of the one default; the
                                     four knobs above are then each profile's defaults, and
                                     a profile without a network key gets none.
  OPENAI4S_CGROUP_ROOT=PATH|off      Local backend: where job cgroups go, as a path inside
                                     the cgroup hierarchy (a subtree delegated to a daemon
                                     that is not root); off: rlimits only. Default: below
                                     the daemon's own cgroup (v1), /openai4s (v2).
  A bad value stops the start (exit 2) naming every such variable at once; an empty value
  is the same as unset.

A state dir of the old single-directory layout (workloads/ inside it) is migrated at
start: workspaces and logs move to the spool by rename, running jobs keep running.

SIGTERM or SIGINT stops accepting requests, lets the current reconciler tick finish,
closes the database and removes the socket; exit status 0.
Exit codes: 0 stopped cleanly, 1 could not start or run, 2 usage or configuration error.
`;
}

const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

export interface ServeOptions {
  readonly stateDir: string;
  /** Limits for principals added without their own (`--principal-max-*`). */
  readonly principalDefaults: PrincipalLimits;
  /** Null: the backend's default spool. */
  readonly spoolDir: string | null;
  readonly allowNetworkDb: boolean;
  /** `--spool-low-water`; null: the default (5 % of the spool's filesystem, at most 1 GiB). */
  readonly spoolLowWaterBytes: number | null;
  readonly listen: readonly ListenAddress[];
  readonly backend: string;
  readonly clusterConfigPath: string | null;
  readonly logLevel: LogLevel;
  /** Who jobs run as: a leased uid per workload, one account, or the daemon's own uid. */
  readonly identity: IdentityChoice;
  /** `--allow-unsandboxed-batch`. */
  readonly allowUnsandboxedBatch: boolean;
  readonly pacing: ReconcilerPacing;
  /** `--body-timeout-ms`; absent: the API's default. */
  readonly bodyTimeoutMs?: number;
  /** `--max-upload-size`; absent: the daemon's default. */
  readonly maxUploadBytes?: number;
}

/** The reconciler's polling ceiling, back-off and command bound; unset fields: defaults. */
export interface ReconcilerPacing {
  readonly minIntervalMs?: number;
  readonly maxIntervalMs?: number;
  readonly maxCommandsInFlight?: number;
}

function positiveInt(flag: string, raw: string | undefined, min: number): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min) {
    throw new UsageError(`serve: --${flag} must be a whole number >= ${min}`);
  }
  return n;
}

function parsePacing(v: ReturnType<typeof parse>["values"]): ReconcilerPacing {
  const minIntervalMs = positiveInt("poll-min-ms", v["poll-min-ms"], 1);
  const maxIntervalMs = positiveInt("poll-max-ms", v["poll-max-ms"], 1);
  const maxCommandsInFlight = positiveInt("max-commands", v["max-commands"], 2);
  if ((maxIntervalMs ?? 30_000) < (minIntervalMs ?? 1000)) {
    throw new UsageError("serve: --poll-max-ms must not be below --poll-min-ms");
  }
  return {
    ...(minIntervalMs !== undefined ? { minIntervalMs } : {}),
    ...(maxIntervalMs !== undefined ? { maxIntervalMs } : {}),
    ...(maxCommandsInFlight !== undefined ? { maxCommandsInFlight } : {}),
  };
}

/** Flags to options; every problem is a UsageError naming its flag (exit 2). */
export function parseServeArgs(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  homeDir: string,
  daemonUid: number = process.getuid?.() ?? -1,
): ServeOptions | "help" {
  const parsed = parse(args);
  const v = parsed.values;
  if (v.help) return "help";
  if (parsed.positionals.length > 0) {
    throw new UsageError(`serve: unexpected argument "${parsed.positionals[0]}"`);
  }
  const stateDir = resolveStateDir({ flag: v["state-dir"], env, homeDir, cwd }).path;
  const backend = v.backend ?? DEFAULT_BACKEND;
  if (!Object.hasOwn(BACKENDS, backend)) {
    throw new UsageError(
      `serve: --backend "${backend}" is not one of ${Object.keys(BACKENDS).join(", ")}`,
    );
  }
  const logLevel = (v["log-level"] ?? "info") as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new UsageError(`serve: --log-level must be one of ${LOG_LEVELS.join(", ")}`);
  }
  const rawListen = v.listen ?? [];
  const listen: ListenAddress[] = [];
  for (const raw of rawListen) {
    const result = parseListenAddress(raw, cwd);
    if (result.kind === "Invalid") throw new UsageError(`serve: --listen ${result.message}`);
    const address = result.address;
    if (address.kind === "tcp" && !isLoopback(address.host) && !v["allow-remote"]) {
      throw new UsageError(
        `serve: --listen ${raw} is not a loopback address; add --allow-remote to expose the admin API`,
      );
    }
    listen.push(address);
  }
  // The state dir's socket is where the CLI and `backup` find the daemon: --listen adds to
  // it, never replaces it (a TCP listener must not make the local tools say "no daemon").
  const defaultSocket = resolve(stateDir, "api.sock");
  if (!listen.some((a) => a.kind === "unix" && a.path === defaultSocket)) {
    listen.unshift({ kind: "unix", path: defaultSocket });
  }
  const clusterConfig = v["cluster-config"];
  const runAsEnv = env[RUN_AS_ENV];
  const runAsSpec = v["run-as"] ?? (runAsEnv === "" ? undefined : runAsEnv);
  const rangeEnv = env[UID_RANGE_ENV];
  const uidRangeSpec = v["uid-range"] ?? (rangeEnv === "" ? undefined : rangeEnv);
  const identity = chooseJobIdentity(runAsSpec, uidRangeSpec, daemonUid, systemIdentityDatabase());
  if (identity.kind === "Invalid") throw new UsageError(`serve: ${identity.message}`);
  return {
    stateDir,
    spoolDir: resolveSpoolDir({ flag: v["spool-dir"], env, cwd }),
    allowNetworkDb: v["allow-network-db"] === true,
    spoolLowWaterBytes:
      v["spool-low-water"] === undefined ? null : parseLowWater(v["spool-low-water"]),
    listen,
    backend,
    clusterConfigPath: clusterConfig === undefined ? null : resolve(cwd, clusterConfig),
    logLevel,
    identity: identity.identity,
    allowUnsandboxedBatch: v["allow-unsandboxed-batch"] === true,
    pacing: parsePacing(v),
    ...bodyTimeout(v),
    ...maxUpload(v),
    principalDefaults: principalDefaults(v, env),
  };
}

/** `--principal-max-*`, else `$OPENAI4S_PRINCIPAL_MAX_*`, else no limit. */
function principalDefaults(
  v: ReturnType<typeof parse>["values"],
  env: Readonly<Record<string, string | undefined>>,
): PrincipalLimits {
  const one = (name: "sessions" | "batch" | "cpus" | "gpus"): number | null => {
    const flag = `principal-max-${name}` as const;
    const envName = `OPENAI4S_PRINCIPAL_MAX_${name.toUpperCase()}`;
    const text = v[flag] ?? (env[envName] === "" ? undefined : env[envName]);
    if (text === undefined) return null;
    if (!/^[0-9]{1,7}$/.test(text)) {
      throw new UsageError(`serve: --${flag} (or ${envName}) "${text}" is not a whole number`);
    }
    return Number(text);
  };
  return {
    maxSessions: one("sessions"),
    maxBatch: one("batch"),
    maxCpus: one("cpus"),
    maxGpus: one("gpus"),
  };
}

function bodyTimeout(v: ReturnType<typeof parse>["values"]): { bodyTimeoutMs?: number } {
  const bodyTimeoutMs = positiveInt("body-timeout-ms", v["body-timeout-ms"], 1);
  return bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs };
}

function maxUpload(v: ReturnType<typeof parse>["values"]): { maxUploadBytes?: number } {
  const raw = v["max-upload-size"];
  if (raw === undefined) return {};
  let bytes: number;
  try {
    bytes = parseLowWater(raw);
  } catch {
    bytes = 0;
  }
  if (bytes < 1) {
    throw new UsageError(
      `serve: --max-upload-size must be a size such as 500M or 64G, got ${JSON.stringify(raw)}`,
    );
  }
  return { maxUploadBytes: bytes };
}

function parse(args: readonly string[]) {
  return parseStrict("serve", args, {
    "state-dir": { type: "string" },
    "spool-dir": { type: "string" },
    "allow-network-db": { type: "boolean" },
    "allow-unsandboxed-batch": { type: "boolean" },
    "spool-low-water": { type: "string" },
    listen: { type: "string", multiple: true },
    "allow-remote": { type: "boolean" },
    backend: { type: "string" },
    "cluster-config": { type: "string" },
    "log-level": { type: "string" },
    "run-as": { type: "string" },
    "uid-range": { type: "string" },
    "poll-min-ms": { type: "string" },
    "poll-max-ms": { type: "string" },
    "max-commands": { type: "string" },
    "body-timeout-ms": { type: "string" },
    "max-upload-size": { type: "string" },
    "principal-max-sessions": { type: "string" },
    "principal-max-batch": { type: "string" },
    "principal-max-cpus": { type: "string" },
    "principal-max-gpus": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
}

/**
 * Resolves on the first SIGTERM or SIGINT. Later signals are logged and otherwise ignored:
 * supervisors often deliver one signal twice (to the process and to its group), and a
 * duplicate must not turn a clean shutdown into an abrupt one. Shutdown is bounded anyway
 * (the drain timeout, one tick); SIGKILL remains for a daemon that truly hangs.
 */
function firstSignal(onRepeat: (signal: string) => void): {
  readonly received: Promise<string>;
  dispose(): void;
} {
  let seen = false;
  let resolveSignal: (signal: string) => void = () => {};
  const received = new Promise<string>((resolve) => {
    resolveSignal = resolve;
  });
  const handler = (signal: NodeJS.Signals) => {
    if (seen) {
      onRepeat(signal);
      return;
    }
    seen = true;
    resolveSignal(signal);
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
  return {
    received,
    dispose() {
      process.off("SIGTERM", handler);
      process.off("SIGINT", handler);
    },
  };
}

export const serveCommand: Command = {
  name: "serve",
  summary: "Run the daemon: admin API, reconciler and (opt-in) worker gateway",
  async run(args: readonly string[], io: CommandIo) {
    const options = parseServeArgs(args, io.env, process.cwd(), homedir());
    if (options === "help") {
      io.stdout(help());
      return 0;
    }
    const log = jsonLog((line) => io.stderr(line), { level: options.logLevel });
    const started = await startDaemon({
      stateDir: options.stateDir,
      spoolDir: options.spoolDir,
      allowNetworkDb: options.allowNetworkDb,
      spoolLowWaterBytes: options.spoolLowWaterBytes,
      listen: options.listen,
      backend: options.backend,
      clusterConfigPath: options.clusterConfigPath,
      pacing: options.pacing,
      ...(options.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: options.bodyTimeoutMs } : {}),
      ...(options.maxUploadBytes !== undefined ? { maxUploadBytes: options.maxUploadBytes } : {}),
      version: VERSION,
      env: io.env,
      selfCommand: selfCommand(),
      clock: systemClock,
      log,
      identity: options.identity,
      allowUnsandboxedBatch: options.allowUnsandboxedBatch,
      principalDefaults: options.principalDefaults,
    });
    switch (started.kind) {
      case "ConfigError":
        log.error("configuration error", { message: started.message });
        io.stderr(`openai4s serve: ${started.message}\n`);
        return 2;
      case "Failed":
        log.error("could not start", { message: started.message });
        io.stderr(`openai4s serve: ${started.message}\n`);
        return 1;
      case "Started":
        break;
      default: {
        const never: never = started;
        throw new Error(`unhandled start result ${JSON.stringify(never)}`);
      }
    }
    // Handlers go in only now: a usage or configuration error above exits at once.
    const signals = firstSignal((repeat) => {
      log.info("already stopping; signal ignored", { signal: repeat });
    });
    const signal = await signals.received;
    log.info("signal received", { signal });
    try {
      await started.daemon.stop();
    } finally {
      signals.dispose();
    }
    return 0;
  },
};
