/**
 * The daemon's configuration, parsed and validated once, at start: `serve`'s flags
 * (serve-flags.ts) and the settings from its environment, into one typed object the daemon
 * and the composition receive (`composition/`). The failure it replaces: each
 * composition file read `env[...]` and parsed its own variables, some twice (the gateway's
 * address in four places), some only on the path that happened to need them, so a typo in
 * one variable surfaced minutes later or never.
 *
 * Every variable is checked whether or not this start needs it (an orphan policy on a local
 * daemon included): a start refuses with every bad variable named, instead of one at a time.
 * An empty value is the same as unset. The variables are listed in `serve --help` and
 * docs/operations.md. What the daemon passes on to the programs it starts (PATH, the cluster
 * client's variables, the local backend's job environment) is not a setting: that stays the
 * environment itself.
 */

import * as v from "valibot";
import { MIN_OWNER_UID_ENV, parseMinOwnerUid } from "../../adapters/isolation-bwrap/run-as.ts";
import type { AccountDatabase } from "../../core/accounts.ts";
import type { OrphanPolicy } from "../../core/ports/allocation-backend.ts";
import type { RegisteredBackend } from "../../core/ports/backend-plugin.ts";
import { WORKER_LISTEN_ENV, workerGatewayListenFromEnv } from "../../core/ports/worker-gateway.ts";
import type { ReclaimerDefaults } from "../../core/reclaimer.ts";
import {
  DEFAULT_PROFILE_BREAKER,
  type ProfileBreakerOptions,
} from "../../core/reconciler/profile-breaker.ts";
import { DEFAULT_INTERRUPT_GRACE_MS } from "../../core/session/exec-service.ts";
import { type FaultPoints, faultPointsFromEnv } from "../../lib/fault-point.ts";
import type { BrowserGuardSettings } from "../../servers/http/browser-guard.ts";
import { parseBrowserSettings } from "./browser-settings.ts";
import { BACKENDS } from "./composition/backends.ts";
import { parseServeArgs, type ServeOptions } from "./serve-flags.ts";

/** How sessions run: the worker command, the default lease, the exec grace, the gateway's TLS. */
export interface SessionSettings {
  readonly workerCommand: readonly string[];
  readonly lease: ReclaimerDefaults;
  readonly interruptGraceMs: number;
  readonly tls: GatewayTlsSetting;
}

/** The worker gateway's TLS: generated (the default), the admin's own pair, or off. */
export type GatewayTlsSetting =
  /** The daemon's own self-signed certificate, generated into its private state. */
  | { readonly kind: "Generated" }
  /** The admin's key and certificate files. */
  | { readonly kind: "Given"; readonly key: string; readonly cert: string }
  /** Plain TCP: only by the admin's explicit choice (OPENAI4S_WORKER_TLS=off). */
  | { readonly kind: "Off" };

export interface DaemonSettings {
  /** `OPENAI4S_WORKER_LISTEN`: the gateway's HOST:PORT; null: the gateway stays closed. */
  readonly workerListen: string | null;
  readonly sessions: SessionSettings;
  readonly profileBreaker: ProfileBreakerOptions;
  readonly orphanSweep: { readonly policy: OrphanPolicy; readonly intervalSeconds: number };
  /** `OPENAI4S_BWRAP`: the bubblewrap program; null: found on PATH. */
  readonly bwrapPath: string | null;
  /** `OPENAI4S_SANDBOX_READONLY`, split; checked against the state dir where it is known. */
  readonly sandboxReadOnly: readonly string[];
  /** `OPENAI4S_FAULT_POINT`: where a crash test kills the daemon (lib/fault-point.ts). */
  readonly faults: FaultPoints;
  /** `OPENAI4S_MIN_OWNER_UID`: the lowest uid a job may run as under `run_as = "owner"`. */
  readonly minOwnerUid: number;
  /**
   * Each listed backend's own settings, by name, as its plugin read them (the local
   * backend's knobs, profiles file and cgroup root): every backend's variables are checked
   * whether or not this daemon runs it.
   */
  readonly backends: Readonly<Record<string, unknown>>;
  /** `OPENAI4S_ALLOWED_HOSTS` and `_ORIGINS`: what the API's browser guard allows. */
  readonly browser: BrowserGuardSettings;
}

export interface SettingError {
  /** The variable, e.g. `OPENAI4S_ORPHAN_POLICY`. */
  readonly variable: string;
  /** Names the variable too, so it reads alone. */
  readonly message: string;
}

export type SettingsResult =
  | { readonly kind: "Parsed"; readonly settings: DaemonSettings }
  | { readonly kind: "Invalid"; readonly errors: readonly SettingError[] };

/**
 * Replaces the worker command (JSON array of strings) — for tests that must hold a worker
 * back or wrap it, never needed in production. The daemon's environment is the admin's, so
 * this grants nothing the admin could not do by replacing the binary.
 */
export const WORKER_COMMAND_ENV = "OPENAI4S_WORKER_COMMAND";
/** The daemon's default idle timeout for sessions that do not set one (whole seconds). */
export const IDLE_TIMEOUT_ENV = "OPENAI4S_SESSION_IDLE_TIMEOUT_SECONDS";
/** The daemon's default maximum session lifetime (whole seconds). */
export const MAX_LIFETIME_ENV = "OPENAI4S_SESSION_MAX_LIFETIME_SECONDS";
/** How long an interrupted cell has to stop before its kernel is restarted (milliseconds). */
export const INTERRUPT_GRACE_ENV = "OPENAI4S_INTERRUPT_GRACE_MS";
/** "off": the worker gateway without TLS (the explicit opt-out). */
export const WORKER_TLS_ENV = "OPENAI4S_WORKER_TLS";
/** The admin's TLS key and certificate for the worker gateway (both or neither). */
export const WORKER_TLS_KEY_ENV = "OPENAI4S_WORKER_TLS_KEY";
export const WORKER_TLS_CERT_ENV = "OPENAI4S_WORKER_TLS_CERT";
/** Refusals in a row that degrade a profile (profile-breaker.ts). */
export const PROFILE_BREAKER_THRESHOLD_ENV = "OPENAI4S_PROFILE_BREAKER_THRESHOLD";
/** The first back-off before a degraded profile is tried again (whole seconds). */
export const PROFILE_BREAKER_BACKOFF_ENV = "OPENAI4S_PROFILE_BREAKER_BACKOFF_SECONDS";
/** What the orphan sweep does with a job that has no row: report or cancel. */
export const ORPHAN_POLICY_ENV = "OPENAI4S_ORPHAN_POLICY";
/** How often the orphan sweep runs (it also sweeps at start; whole seconds). */
export const ORPHAN_SWEEP_SECONDS_ENV = "OPENAI4S_ORPHAN_SWEEP_SECONDS";
/** The bubblewrap program, when not the one on PATH. */
export const BWRAP_ENV = "OPENAI4S_BWRAP";
/** The admin's extra read-only directories in every sandbox (sandbox-read-only.ts). */
export const SANDBOX_READONLY_ENV = "OPENAI4S_SANDBOX_READONLY";

/** Defaults an admin can live with; a spec's own idleTimeoutSeconds/maxLifetimeSeconds win. */
export const DEFAULT_LEASE: ReclaimerDefaults = {
  idleTimeoutSeconds: 60 * 60,
  maxLifetimeSeconds: 24 * 60 * 60,
};
const DEFAULT_ORPHAN_SWEEP_SECONDS = 300;

/** A whole number in `min..max` written in plain digits (no sign, exponent or spaces). */
function whole(min: number, max: number, message: string) {
  return v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,10}$/, message),
    v.transform(Number),
    v.minValue(min, message),
    v.maxValue(max, message),
  );
}

const WORKER_COMMAND_MESSAGE = `${WORKER_COMMAND_ENV} must be a JSON array of non-empty strings`;
const WorkerCommand = v.pipe(
  v.string(),
  v.parseJson(undefined, WORKER_COMMAND_MESSAGE),
  v.array(
    v.pipe(v.string(WORKER_COMMAND_MESSAGE), v.minLength(1, WORKER_COMMAND_MESSAGE)),
    WORKER_COMMAND_MESSAGE,
  ),
  v.minLength(1, WORKER_COMMAND_MESSAGE),
);

/** One entry per variable: its raw text (unset and empty are the same) and what it must be. */
const Environment = v.object({
  [WORKER_COMMAND_ENV]: v.optional(WorkerCommand),
  [IDLE_TIMEOUT_ENV]: v.optional(
    whole(1, 9_999_999_999, `${IDLE_TIMEOUT_ENV} must be a whole number of seconds ≥ 1`),
  ),
  [MAX_LIFETIME_ENV]: v.optional(
    whole(1, 9_999_999_999, `${MAX_LIFETIME_ENV} must be a whole number of seconds ≥ 1`),
  ),
  // At least 1: a zero grace would restart the kernel under every interrupt.
  [INTERRUPT_GRACE_ENV]: v.optional(
    whole(1, 99_999_999, `${INTERRUPT_GRACE_ENV} must be a whole number of milliseconds ≥ 1`),
  ),
  [WORKER_TLS_ENV]: v.optional(
    v.picklist(["on", "off"], `${WORKER_TLS_ENV} must be "on" or "off"`),
  ),
  [WORKER_TLS_KEY_ENV]: v.optional(v.string()),
  [WORKER_TLS_CERT_ENV]: v.optional(v.string()),
  [PROFILE_BREAKER_THRESHOLD_ENV]: v.optional(
    whole(
      1,
      1000,
      `${PROFILE_BREAKER_THRESHOLD_ENV} must be a whole number of refusals in 1..1000`,
    ),
  ),
  [PROFILE_BREAKER_BACKOFF_ENV]: v.optional(
    whole(
      1,
      86_400,
      `${PROFILE_BREAKER_BACKOFF_ENV} must be a whole number of seconds in 1..86400`,
    ),
  ),
  [ORPHAN_POLICY_ENV]: v.optional(
    v.picklist(["report", "cancel"], `${ORPHAN_POLICY_ENV} must be report or cancel`),
  ),
  [ORPHAN_SWEEP_SECONDS_ENV]: v.optional(
    whole(1, 86_400, `${ORPHAN_SWEEP_SECONDS_ENV} must be a whole number of seconds in 1..86400`),
  ),
  [BWRAP_ENV]: v.optional(v.string()),
  [SANDBOX_READONLY_ENV]: v.optional(v.string()),
});

/** The daemon's settings from `env`; `selfCommand` gives the default worker command. */
export function parseDaemonSettings(
  env: Readonly<Record<string, string | undefined>>,
  selfCommand: readonly string[],
  backendList: readonly RegisteredBackend[] = BACKENDS,
): SettingsResult {
  const raw: Record<string, string> = {};
  for (const name of Object.keys(Environment.entries)) {
    const value = env[name];
    if (value !== undefined && value !== "") raw[name] = value;
  }
  const errors: SettingError[] = [];
  const listen = workerGatewayListenFromEnv(env);
  if (listen.kind === "Invalid") errors.push({ variable: WORKER_LISTEN_ENV, ...listen });
  const minOwnerUid = parseMinOwnerUid(env[MIN_OWNER_UID_ENV]);
  if (typeof minOwnerUid !== "number") {
    errors.push({ variable: MIN_OWNER_UID_ENV, message: minOwnerUid.error });
  }
  const backends = parseBackendSettings(env, backendList);
  if (backends.kind === "Invalid") errors.push(...backends.errors);
  const browser = parseBrowserSettings(env);
  if (browser.kind === "Invalid") errors.push(...browser.errors);
  const parsed = v.safeParse(Environment, raw, { abortPipeEarly: true });
  if (!parsed.success) {
    for (const issue of parsed.issues) {
      const variable = String(issue.path?.[0]?.key ?? "environment");
      // Every message is written naming its variable; one that does not still gets it.
      const message = issue.message.includes(variable)
        ? issue.message
        : `${variable}: ${issue.message}`;
      errors.push({ variable, message });
    }
    return { kind: "Invalid", errors };
  }
  const e = parsed.output;
  const tls = tlsSetting(e[WORKER_TLS_ENV], e[WORKER_TLS_KEY_ENV], e[WORKER_TLS_CERT_ENV]);
  if (tls.kind === "Invalid") errors.push({ variable: tls.variable, message: tls.message });
  if (
    errors.length > 0 ||
    tls.kind === "Invalid" ||
    listen.kind === "Invalid" ||
    typeof minOwnerUid !== "number" ||
    backends.kind === "Invalid" ||
    browser.kind === "Invalid"
  ) {
    return { kind: "Invalid", errors };
  }
  const backoffMs =
    (e[PROFILE_BREAKER_BACKOFF_ENV] ?? DEFAULT_PROFILE_BREAKER.initialBackoffMs / 1000) * 1000;
  return {
    kind: "Parsed",
    settings: {
      workerListen: listen.kind === "Enabled" ? listen.listen : null,
      sessions: {
        workerCommand: e[WORKER_COMMAND_ENV] ?? [...selfCommand, "worker"],
        lease: {
          idleTimeoutSeconds: e[IDLE_TIMEOUT_ENV] ?? DEFAULT_LEASE.idleTimeoutSeconds,
          maxLifetimeSeconds: e[MAX_LIFETIME_ENV] ?? DEFAULT_LEASE.maxLifetimeSeconds,
        },
        interruptGraceMs: e[INTERRUPT_GRACE_ENV] ?? DEFAULT_INTERRUPT_GRACE_MS,
        tls,
      },
      profileBreaker: {
        threshold: e[PROFILE_BREAKER_THRESHOLD_ENV] ?? DEFAULT_PROFILE_BREAKER.threshold,
        initialBackoffMs: backoffMs,
        maxBackoffMs: Math.max(backoffMs, DEFAULT_PROFILE_BREAKER.maxBackoffMs),
      },
      orphanSweep: {
        policy: e[ORPHAN_POLICY_ENV] ?? "report",
        intervalSeconds: e[ORPHAN_SWEEP_SECONDS_ENV] ?? DEFAULT_ORPHAN_SWEEP_SECONDS,
      },
      bwrapPath: e[BWRAP_ENV] ?? null,
      sandboxReadOnly: (e[SANDBOX_READONLY_ENV] ?? "").split(":").filter((d) => d !== ""),
      faults: faultPointsFromEnv(env),
      minOwnerUid,
      backends: backends.settings,
      browser: browser.settings,
    },
  };
}

/** Every listed backend's own settings, by name; every bad variable of any of them. */
function parseBackendSettings(
  env: Readonly<Record<string, string | undefined>>,
  backendList: readonly RegisteredBackend[],
):
  | { readonly kind: "Parsed"; readonly settings: Readonly<Record<string, unknown>> }
  | { readonly kind: "Invalid"; readonly errors: readonly SettingError[] } {
  const settings: Record<string, unknown> = {};
  const errors: SettingError[] = [];
  for (const backend of backendList) {
    const read = backend.settings.read(env);
    if (read.kind === "Invalid") errors.push(...read.errors);
    else settings[backend.name] = read.settings;
  }
  return errors.length > 0 ? { kind: "Invalid", errors } : { kind: "Parsed", settings };
}

/** The pair goes together, and off contradicts a given key. */
function tlsSetting(
  mode: "on" | "off" | undefined,
  key: string | undefined,
  cert: string | undefined,
): GatewayTlsSetting | { readonly kind: "Invalid"; variable: string; message: string } {
  if ((key === undefined) !== (cert === undefined)) {
    return {
      kind: "Invalid",
      // Named by the one that was given: that is the line the admin wrote.
      variable: key === undefined ? WORKER_TLS_CERT_ENV : WORKER_TLS_KEY_ENV,
      message: `${WORKER_TLS_KEY_ENV} and ${WORKER_TLS_CERT_ENV} go together: give both or neither`,
    };
  }
  if (mode === "off") {
    if (key !== undefined) {
      return {
        kind: "Invalid",
        variable: WORKER_TLS_ENV,
        message: `${WORKER_TLS_ENV}=off contradicts ${WORKER_TLS_KEY_ENV}`,
      };
    }
    return { kind: "Off" };
  }
  return key === undefined || cert === undefined
    ? { kind: "Generated" }
    : { kind: "Given", key, cert };
}

/** One line for a refused start: every bad variable, each named. */
export function settingErrorsMessage(errors: readonly SettingError[]): string {
  return errors.map((e) => e.message).join("; ");
}

/** `openai4s serve`'s whole configuration: its flags (with the variables that stand in for them) and the daemon's settings. */
export type ServeConfigResult =
  | { readonly kind: "Help" }
  | {
      readonly kind: "Parsed";
      readonly options: ServeOptions;
      readonly settings: DaemonSettings;
    }
  /** The flags were fine; these variables are not (exit 2, before anything is touched). */
  | {
      readonly kind: "Invalid";
      readonly options: ServeOptions;
      readonly errors: readonly SettingError[];
    };

/**
 * Flags and environment, parsed once into one typed object before the daemon starts. A bad
 * flag throws a UsageError naming it (exit 2, with a pointer to --help); bad variables come
 * back all together, each named.
 */
export function parseServeConfig(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  homeDir: string,
  selfCommand: readonly string[],
  /** What the entry point knows of the host: the daemon's uid and the site's accounts. */
  host: { readonly daemonUid: number; readonly accounts: AccountDatabase },
): ServeConfigResult {
  const options = parseServeArgs(args, env, cwd, homeDir, host.daemonUid, host.accounts);
  if (options === "help") return { kind: "Help" };
  const parsed = parseDaemonSettings(env, selfCommand);
  return parsed.kind === "Invalid"
    ? { kind: "Invalid", options, errors: parsed.errors }
    : { kind: "Parsed", options, settings: parsed.settings };
}
