/**
 * The local backend as a plugin (core/ports/backend-plugin.ts): its settings (settings.ts),
 * its profiles (built in, or a file named by OPENAI4S_LOCAL_PROFILES), its limits (cgroups
 * when delegated), its restore helpers, and how it is composed: the daemon's isolation
 * policy decides whether its launches run in the sandbox verified on this machine.
 */
import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import type { BackendPlugin, BackendPluginContext } from "../../core/ports/backend-plugin.ts";
import { errorCode } from "../../lib/durable-fs.ts";
import { readTomlSubset } from "../../lib/toml/cross-check.ts";
import { createLocalBackend } from "./backend.ts";
import { LOCAL_BACKEND_NAME } from "./backend-options.ts";
import { detectLimitEnforcement } from "./limit-enforcement.ts";
import { localProfiles } from "./profiles.ts";
import { rewriteRecordPaths } from "./records.ts";
import {
  cancelUnknownJobs,
  setAsideDir,
  setAsideEndedUnknownJobs,
  unknownRunningJobs,
  waitUntilEnded,
} from "./restore-unknown-jobs.ts";
import {
  CGROUP_ROOT_ENV,
  LOCAL_PROFILES_ENV,
  type LocalSettings,
  MEMORY_MB_ENV,
  MOUNTS_ENV,
  NETWORK_ENV,
  PIDS_MAX_ENV,
  parseLocalSettings,
  RUN_AS_PROFILE_ENV,
  WARN_MINUTES_ENV,
} from "./settings.ts";

/** Far more than any profiles file; a bigger one is a mistake (a log, a binary). */
const MAX_LOCAL_PROFILES_BYTES = 1024 * 1024;

/**
 * The local profiles: OPENAI4S_LOCAL_PROFILES names a file read here, in the strict TOML
 * subset (and through the same cross-checked reader) the cluster config uses, so a file
 * that two TOML readers would read differently is refused rather than guessed at.
 */
function configuredLocalProfiles(local: LocalSettings): ReturnType<typeof localProfiles> {
  const path = local.profilesFile;
  if (path === null) return localProfiles(local.knobs);
  const named = `${LOCAL_PROFILES_ENV}=${JSON.stringify(path)}`;
  if (!isAbsolute(path)) return { kind: "ConfigError", message: `${named}: not an absolute path` };
  let text: string;
  try {
    const bytes = readFileSync(path);
    if (bytes.length > MAX_LOCAL_PROFILES_BYTES) {
      return {
        kind: "ConfigError",
        message: `${named}: larger than ${MAX_LOCAL_PROFILES_BYTES} bytes`,
      };
    }
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (error) {
    const code = errorCode(error);
    const why = typeof code === "string" ? code : "not UTF-8 text";
    return { kind: "ConfigError", message: `${named}: cannot read it (${why})` };
  }
  return localProfiles(local.knobs, { name: path, read: readTomlSubset(text) });
}

async function create(context: BackendPluginContext<LocalSettings>) {
  if (context.clusterConfigPath !== null) {
    return {
      kind: "ConfigError" as const,
      message: `--cluster-config is for a cluster backend; the ${LOCAL_BACKEND_NAME} backend takes none`,
    };
  }
  const configured = configuredLocalProfiles(context.settings);
  if (configured.kind === "ConfigError") return configured;
  const backendDir = context.layout.backendDir(LOCAL_BACKEND_NAME);
  const limits = detectLimitEnforcement({ cgroupRoot: context.settings.cgroupRoot, backendDir });
  const options = {
    profiles: configured.profiles,
    backendDir,
    spoolDir: context.layout.spool,
    limits,
    // Only with the gateway on: a profile without network then refuses sessions, named.
    ...(context.workerSocket !== null ? { workerSocket: context.workerSocket } : {}),
    selfCommand: context.selfCommand,
    clock: context.clock,
    log: context.log,
    hostEnv: context.env,
    faults: context.faults,
    plainLaunch: context.isolation.plainLaunch,
    mountForbidden: [context.layout.root, context.layout.spool],
  };
  const isolated = await context.isolation.onThisMachine((sandbox) =>
    // Whenever the sandbox verifies, BATCH runs in it too: the private dir and other
    // workloads stay hidden.
    createLocalBackend(sandbox === null ? options : { ...options, sandbox }),
  );
  return { kind: "Created" as const, ...isolated };
}

export const localBackendPlugin: BackendPlugin<LocalSettings> = {
  name: LOCAL_BACKEND_NAME,
  describe:
    "this machine: jobs run as local process groups, in bubblewrap when it verifies; SESSIONs too with the worker gateway on",
  requiresSpoolDir: false,
  settings: {
    variables: [
      WARN_MINUTES_ENV,
      MEMORY_MB_ENV,
      PIDS_MAX_ENV,
      NETWORK_ENV,
      LOCAL_PROFILES_ENV,
      RUN_AS_PROFILE_ENV,
      MOUNTS_ENV,
      CGROUP_ROOT_ENV,
    ],
    read(env) {
      const parsed = parseLocalSettings(env);
      return parsed.kind === "Parsed" ? { kind: "Parsed", settings: parsed.local } : parsed;
    },
  },
  configCheck: null,
  capabilities: {
    tasks: true,
    changes: true,
    terminalFacts: true,
    sessionIsolation: false,
    launchSandbox: true,
    batchGate: false,
    jobEnv: false,
  },
  restore: {
    unknownRunningJobs,
    cancelUnknownJobs,
    waitUntilEnded,
    setAsideEndedUnknownJobs,
    setAsideDir,
    rewriteRecordPaths,
  },
  schedulerBroker: null,
  create,
};
