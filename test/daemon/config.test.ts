/**
 * The daemon's settings from its environment, parsed once at start (src/apps/daemon/config.ts):
 * defaults, an admin's values, and every malformed value refused with the variable named.
 */
import { describe, expect, test } from "bun:test";
import {
  DEFAULT_LEASE,
  IDLE_TIMEOUT_ENV,
  INTERRUPT_GRACE_ENV,
  MAX_LIFETIME_ENV,
  ORPHAN_POLICY_ENV,
  ORPHAN_SWEEP_SECONDS_ENV,
  PROFILE_BREAKER_BACKOFF_ENV,
  PROFILE_BREAKER_THRESHOLD_ENV,
  parseDaemonSettings,
  SANDBOX_READONLY_ENV,
  settingErrorsMessage,
  WORKER_COMMAND_ENV,
  WORKER_TLS_CERT_ENV,
  WORKER_TLS_ENV,
  WORKER_TLS_KEY_ENV,
} from "../../src/apps/daemon/config.ts";
import { startDaemon } from "../../src/apps/daemon/daemon.ts";
import { WORKER_LISTEN_ENV } from "../../src/core/ports/worker-gateway.ts";
import { noFaultPoints } from "../../src/lib/fault-point.ts";
import { localDaemonConfig } from "../support/daemon-config.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SELF = ["/opt/openai4s"];

function settings(env: Record<string, string>) {
  const parsed = parseDaemonSettings(env, SELF);
  if (parsed.kind !== "Parsed") throw new Error(settingErrorsMessage(parsed.errors));
  return parsed.settings;
}

describe("the daemon's settings from its environment", () => {
  test("defaults: no gateway, this binary's worker, the default lease, breaker and sweep", () => {
    expect(settings({})).toEqual({
      workerListen: null,
      sessions: {
        workerCommand: ["/opt/openai4s", "worker"],
        lease: DEFAULT_LEASE,
        interruptGraceMs: 10_000,
        tls: { kind: "Generated" },
      },
      profileBreaker: { threshold: 3, initialBackoffMs: 30_000, maxBackoffMs: 1_800_000 },
      orphanSweep: { policy: "report", intervalSeconds: 300 },
      bwrapPath: null,
      sandboxReadOnly: [],
      faults: noFaultPoints,
      minOwnerUid: 1000,
      backends: { local: { knobs: {}, profilesFile: null, cgroupRoot: null }, slurm: {} },
      browser: { allowedHosts: [], allowedOrigins: [] },
    });
  });

  test("an admin's values; an empty value is the same as unset", () => {
    const s = settings({
      [WORKER_LISTEN_ENV]: "0.0.0.0:7001",
      [IDLE_TIMEOUT_ENV]: "900",
      [MAX_LIFETIME_ENV]: "7200",
      [INTERRUPT_GRACE_ENV]: "250",
      [WORKER_TLS_KEY_ENV]: "/etc/o4s/gw.key",
      [WORKER_TLS_CERT_ENV]: "/etc/o4s/gw.crt",
      [WORKER_COMMAND_ENV]: JSON.stringify(["/usr/local/bin/wrapper", "--flag"]),
      [PROFILE_BREAKER_THRESHOLD_ENV]: "5",
      [PROFILE_BREAKER_BACKOFF_ENV]: "2",
      [ORPHAN_POLICY_ENV]: "cancel",
      [ORPHAN_SWEEP_SECONDS_ENV]: "1",
      OPENAI4S_BWRAP: "/opt/bwrap",
      [SANDBOX_READONLY_ENV]: "/opt/conda::/usr/share/fonts",
      [WORKER_TLS_ENV]: "",
      OPENAI4S_MIN_OWNER_UID: "500",
      OPENAI4S_LOCAL_MEMORY_MB: "300",
      OPENAI4S_LOCAL_NETWORK: "none",
      OPENAI4S_LOCAL_PROFILES: "/etc/o4s/local.toml",
      OPENAI4S_CGROUP_ROOT: "off",
      OPENAI4S_ALLOWED_HOSTS: " Login1.Example.ORG., 10.1.2.3 ,[FE80::1]",
      OPENAI4S_ALLOWED_ORIGINS: "https://hub.example.org:443,http://10.1.2.3:8080",
    });
    expect(s).toEqual({
      workerListen: "0.0.0.0:7001",
      sessions: {
        workerCommand: ["/usr/local/bin/wrapper", "--flag"],
        lease: { idleTimeoutSeconds: 900, maxLifetimeSeconds: 7200 },
        interruptGraceMs: 250,
        tls: { kind: "Given", key: "/etc/o4s/gw.key", cert: "/etc/o4s/gw.crt" },
      },
      profileBreaker: { threshold: 5, initialBackoffMs: 2_000, maxBackoffMs: 1_800_000 },
      orphanSweep: { policy: "cancel", intervalSeconds: 1 },
      bwrapPath: "/opt/bwrap",
      sandboxReadOnly: ["/opt/conda", "/usr/share/fonts"],
      faults: noFaultPoints,
      minOwnerUid: 500,
      backends: {
        local: {
          knobs: { memoryMb: 300, network: "none" },
          profilesFile: "/etc/o4s/local.toml",
          cgroupRoot: "off",
        },
        slurm: {},
      },
      browser: {
        allowedHosts: ["login1.example.org", "10.1.2.3", "[fe80::1]"],
        allowedOrigins: ["https://hub.example.org", "http://10.1.2.3:8080"],
      },
    });
    expect(settings({ [WORKER_TLS_ENV]: "off" }).sessions.tls).toEqual({ kind: "Off" });
  });

  test("anything malformed is refused, naming the variable", () => {
    for (const env of [
      { [WORKER_LISTEN_ENV]: "nowhere" },
      { [IDLE_TIMEOUT_ENV]: "15m" },
      { [IDLE_TIMEOUT_ENV]: "0" },
      { [MAX_LIFETIME_ENV]: "-1" },
      { [INTERRUPT_GRACE_ENV]: "2s" },
      { [INTERRUPT_GRACE_ENV]: "-5" },
      { [INTERRUPT_GRACE_ENV]: "0" },
      { [WORKER_TLS_ENV]: "maybe" },
      { [WORKER_TLS_KEY_ENV]: "/only/the/key" },
      { [WORKER_TLS_ENV]: "off", [WORKER_TLS_KEY_ENV]: "/k", [WORKER_TLS_CERT_ENV]: "/c" },
      { [WORKER_COMMAND_ENV]: "/bin/worker" },
      { [WORKER_COMMAND_ENV]: "[]" },
      { [WORKER_COMMAND_ENV]: '["ok", 3]' },
      { [PROFILE_BREAKER_THRESHOLD_ENV]: "0" },
      { [PROFILE_BREAKER_THRESHOLD_ENV]: "three" },
      { [PROFILE_BREAKER_BACKOFF_ENV]: "-1" },
      { [PROFILE_BREAKER_BACKOFF_ENV]: "1.5" },
      { [ORPHAN_POLICY_ENV]: "ignore" },
      { [ORPHAN_SWEEP_SECONDS_ENV]: "0" },
      { [ORPHAN_SWEEP_SECONDS_ENV]: "86401" },
      { OPENAI4S_MIN_OWNER_UID: "0" },
      { OPENAI4S_MIN_OWNER_UID: "1k" },
      { OPENAI4S_LOCAL_MEMORY_MB: "2G" },
      { OPENAI4S_LOCAL_PIDS_MAX: "3" },
      { OPENAI4S_LOCAL_NETWORK: "off" },
      { OPENAI4S_LOCAL_RUN_AS: "me" },
      { OPENAI4S_LOCAL_MOUNTS: "relative:/a:ro" },
      { OPENAI4S_WARN_MINUTES_BEFORE_LIMIT: "5m" },
      { OPENAI4S_ALLOWED_HOSTS: "login1:8080" },
      { OPENAI4S_ALLOWED_HOSTS: "https://login1" },
      { OPENAI4S_ALLOWED_HOSTS: "*" },
      { OPENAI4S_ALLOWED_ORIGINS: "hub.example.org" },
      { OPENAI4S_ALLOWED_ORIGINS: "https://hub.example.org/lab" },
      { OPENAI4S_ALLOWED_ORIGINS: "null" },
      { OPENAI4S_ALLOWED_ORIGINS: "*" },
    ]) {
      const parsed = parseDaemonSettings(env, SELF);
      const name = Object.keys(env)[0] ?? "";
      expect({ env, kind: parsed.kind }).toEqual({ env, kind: "Invalid" });
      if (parsed.kind !== "Invalid") continue;
      expect(parsed.errors.map((e) => e.variable)).toContain(name);
      expect(settingErrorsMessage(parsed.errors)).toContain(name);
    }
  });

  test("every bad variable is named at once, not one per start", () => {
    const parsed = parseDaemonSettings(
      {
        [ORPHAN_POLICY_ENV]: "ignore",
        [IDLE_TIMEOUT_ENV]: "soon",
        [WORKER_LISTEN_ENV]: "x",
        OPENAI4S_LOCAL_MEMORY_MB: "lots",
        OPENAI4S_LOCAL_NETWORK: "off",
      },
      SELF,
    );
    expect(parsed.kind === "Invalid" ? parsed.errors.map((e) => e.variable).sort() : []).toEqual(
      [
        IDLE_TIMEOUT_ENV,
        ORPHAN_POLICY_ENV,
        WORKER_LISTEN_ENV,
        "OPENAI4S_LOCAL_MEMORY_MB",
        "OPENAI4S_LOCAL_NETWORK",
      ].sort(),
    );
  });
});

describe("a start with a bad setting", () => {
  const tempDir = tempDirs("o4s-config-", "each");

  test("stops before the state dir is touched, with the variable named", async () => {
    const stateDir = `${tempDir()}/state`;
    const started = await startDaemon(
      localDaemonConfig(stateDir, {
        env: { PATH: process.env["PATH"], [ORPHAN_POLICY_ENV]: "maybe" },
      }),
    );
    expect(started).toEqual({
      kind: "ConfigError",
      message: `${ORPHAN_POLICY_ENV} must be report or cancel`,
    });
    expect(await Bun.file(stateDir).exists()).toBe(false);
  });
});
