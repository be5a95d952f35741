/**
 * `openai4s serve`'s flags, with the variables that stand in for them ($OPENAI4S_STATE_DIR,
 * $OPENAI4S_SPOOL_DIR, $OPENAI4S_RUN_AS, $OPENAI4S_UID_RANGE, $OPENAI4S_PRINCIPAL_MAX_*),
 * parsed into typed options; every problem is a UsageError naming its flag (exit 2).
 * config.ts puts these and the daemon's settings together as the one configuration.
 */

import { resolve } from "node:path";
import {
  chooseJobIdentity,
  type IdentityChoice,
  RUN_AS_ENV,
  UID_RANGE_ENV,
} from "../../adapters/isolation-bwrap/run-as.ts";
import type { AccountDatabase } from "../../core/accounts.ts";
import type { PrincipalLimits } from "../../core/principals.ts";
import { UsageError } from "../../lib/command/command.ts";
import { parseStrict } from "../../lib/command/parse-args.ts";
import type { LogLevel } from "../../lib/log.ts";
import { BACKENDS, backendNamed, DEFAULT_BACKEND } from "./composition/backends.ts";
import {
  isLoopback,
  type ListenAddress,
  type ListenTlsPaths,
  parseListenAddress,
} from "./listen.ts";
import {
  parseSiteIdentity,
  SITE_IDENTITY_FLAGS,
  type SiteIdentityOptions,
} from "./site-identity-flags.ts";
import { parseLowWater } from "./spool-watch.ts";
import { resolveSpoolDir, resolveStateDir } from "./state-dir.ts";

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
  /** `--state-low-water`; null: the default (5 % of the state dir's filesystem, at most 256 MiB). */
  readonly stateLowWaterBytes: number | null;
  readonly listen: readonly ListenAddress[];
  /** `--tls-cert` and `--tls-key`: TLS on every TCP `--listen`; null: plain HTTP. */
  readonly listenTls: ListenTlsPaths | null;
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
  /** Sign-in through the site: OIDC, MUNGE, the users' socket (`--oidc-*`, `--munge*`). */
  readonly siteIdentity: SiteIdentityOptions;
}

/**
 * `--tls-cert` and `--tls-key` go together, and only with a TCP `--listen`: a pair given
 * without one would leave the admin believing tokens travel encrypted.
 */
function parseListenTls(
  cert: string | undefined,
  key: string | undefined,
  listen: readonly ListenAddress[],
  cwd: string,
): ListenTlsPaths | null {
  if (cert === undefined && key === undefined) return null;
  if (cert === undefined || key === undefined || cert === "" || key === "") {
    throw new UsageError("serve: --tls-cert and --tls-key go together: give both files or neither");
  }
  if (!listen.some((a) => a.kind === "tcp")) {
    throw new UsageError(
      "serve: --tls-cert and --tls-key are for a TCP --listen HOST:PORT; none is given",
    );
  }
  return { certPath: resolve(cwd, cert), keyPath: resolve(cwd, key) };
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
  daemonUid: number,
  /** The site's accounts (NSS), for --run-as: handed in by the entry point, with its clock. */
  accounts: AccountDatabase,
): ServeOptions | "help" {
  const parsed = parse(args);
  const v = parsed.values;
  if (v.help) return "help";
  if (parsed.positionals.length > 0) {
    throw new UsageError(`serve: unexpected argument "${parsed.positionals[0]}"`);
  }
  const stateDir = resolveStateDir({ flag: v["state-dir"], env, homeDir, cwd: () => cwd }).path;
  const backend = v.backend ?? DEFAULT_BACKEND;
  if (backendNamed(backend) === undefined) {
    throw new UsageError(
      `serve: --backend "${backend}" is not one of ${BACKENDS.map((b) => b.name).join(", ")}`,
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
  const listenTls = parseListenTls(v["tls-cert"], v["tls-key"], listen, cwd);
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
  const identity = chooseJobIdentity(runAsSpec, uidRangeSpec, daemonUid, accounts);
  if (identity.kind === "Invalid") throw new UsageError(`serve: ${identity.message}`);
  return {
    stateDir,
    spoolDir: resolveSpoolDir({ flag: v["spool-dir"], env, cwd }),
    allowNetworkDb: v["allow-network-db"] === true,
    spoolLowWaterBytes:
      v["spool-low-water"] === undefined ? null : parseLowWater(v["spool-low-water"]),
    stateLowWaterBytes:
      v["state-low-water"] === undefined
        ? null
        : parseLowWater(v["state-low-water"], "state-low-water"),
    listen,
    listenTls,
    backend,
    clusterConfigPath: clusterConfig === undefined ? null : resolve(cwd, clusterConfig),
    logLevel,
    identity: identity.identity,
    allowUnsandboxedBatch: v["allow-unsandboxed-batch"] === true,
    pacing: parsePacing(v),
    ...bodyTimeout(v),
    ...maxUpload(v),
    principalDefaults: principalDefaults(v, env),
    siteIdentity: parseSiteIdentity(v, env, cwd),
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
    "state-low-water": { type: "string" },
    listen: { type: "string", multiple: true },
    "allow-remote": { type: "boolean" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
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
    ...SITE_IDENTITY_FLAGS,
    help: { type: "boolean", short: "h" },
  });
}
