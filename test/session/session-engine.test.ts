import { describe, expect, test } from "bun:test";
import {
  DEFAULT_LEASE,
  IDLE_TIMEOUT_ENV,
  INTERRUPT_GRACE_ENV,
  MAX_LIFETIME_ENV,
  sessionSettingsFromEnv,
  WORKER_COMMAND_ENV,
  WORKER_TLS_CERT_ENV,
  WORKER_TLS_ENV,
  WORKER_TLS_KEY_ENV,
} from "../../src/apps/daemon/composition/session-engine.ts";

describe("session settings from the daemon's environment", () => {
  test("defaults: this binary's worker role and the default lease", () => {
    expect(sessionSettingsFromEnv({}, ["/opt/openai4s"])).toEqual({
      kind: "Settings",
      settings: {
        workerCommand: ["/opt/openai4s", "worker"],
        lease: DEFAULT_LEASE,
        interruptGraceMs: 10_000,
        tls: { kind: "Generated" },
      },
    });
  });

  test("an admin's lease and a replaced worker command", () => {
    const read = sessionSettingsFromEnv(
      {
        [IDLE_TIMEOUT_ENV]: "900",
        [MAX_LIFETIME_ENV]: "7200",
        [INTERRUPT_GRACE_ENV]: "1500",
        [WORKER_TLS_KEY_ENV]: "/etc/o4s/gw.key",
        [WORKER_TLS_CERT_ENV]: "/etc/o4s/gw.crt",
        [WORKER_COMMAND_ENV]: JSON.stringify(["/usr/local/bin/wrapper", "--flag"]),
      },
      ["/opt/openai4s"],
    );
    expect(read).toEqual({
      kind: "Settings",
      settings: {
        workerCommand: ["/usr/local/bin/wrapper", "--flag"],
        lease: { idleTimeoutSeconds: 900, maxLifetimeSeconds: 7200 },
        interruptGraceMs: 1500,
        tls: { kind: "Given", key: "/etc/o4s/gw.key", cert: "/etc/o4s/gw.crt" },
      },
    });
  });

  test("anything malformed is a configuration error naming the variable", () => {
    for (const env of [
      { [IDLE_TIMEOUT_ENV]: "15m" },
      { [IDLE_TIMEOUT_ENV]: "0" },
      { [MAX_LIFETIME_ENV]: "-1" },
      { [INTERRUPT_GRACE_ENV]: "0" },
      { [INTERRUPT_GRACE_ENV]: "10s" },
      { [WORKER_TLS_ENV]: "maybe" },
      { [WORKER_TLS_KEY_ENV]: "/only/the/key" },
      { [WORKER_TLS_ENV]: "off", [WORKER_TLS_KEY_ENV]: "/k", [WORKER_TLS_CERT_ENV]: "/c" },
      { [WORKER_COMMAND_ENV]: "/bin/worker" },
      { [WORKER_COMMAND_ENV]: "[]" },
      { [WORKER_COMMAND_ENV]: '["ok", 3]' },
    ]) {
      const read = sessionSettingsFromEnv(env, ["/opt/openai4s"]);
      expect(read.kind).toBe("Invalid");
      if (read.kind === "Invalid") expect(read.message).toContain(Object.keys(env)[0] ?? "");
    }
  });
});
