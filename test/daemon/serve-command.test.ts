import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { systemAccounts } from "../../src/adapters/accounts-nss/getent-accounts.ts";
import { BACKENDS } from "../../src/apps/daemon/composition/index.ts";
import { parseServeConfig } from "../../src/apps/daemon/config.ts";
import { parseServeArgs } from "../../src/apps/daemon/serve-flags.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { UsageError } from "../../src/lib/command/command.ts";
import { main } from "../../src/main.ts";
import { captureIo } from "../support/cli-runtime.ts";

const parse = (args: string[], env: Record<string, string> = {}, daemonUid = 0) =>
  parseServeArgs(args, env, "/srv/o4s", "/home/ada", daemonUid, systemAccounts(systemClock));

const NOBODY = { uid: 65534, gid: 65534, label: "nobody" };

describe("serve flags", () => {
  test("defaults: the state dir's socket, the default backend", () => {
    expect(parse([], { OPENAI4S_STATE_DIR: "/s" })).toEqual({
      stateDir: "/s",
      spoolDir: null,
      allowNetworkDb: false,
      spoolLowWaterBytes: null,
      stateLowWaterBytes: null,
      listen: [{ kind: "unix", path: "/s/api.sock" }],
      listenTls: null,
      backend: "local",
      clusterConfigPath: null,
      logLevel: "info",
      identity: { kind: "Leased", range: { first: 61184, last: 65519 } },
      allowUnsandboxedBatch: false,
      pacing: {},
      principalDefaults: { maxSessions: null, maxBatch: null, maxCpus: null, maxGpus: null },
      siteIdentity: { oidc: null, munge: null, usersSocket: null },
    });
  });

  test("--oidc-* (else $OPENAI4S_OIDC_*), --munge and --users-socket; mistakes name the flag", () => {
    expect(
      parse(
        [
          "--oidc-issuer",
          "https://id.example.org/realms/hpc",
          "--munge",
          "--users-socket",
          "u.sock",
        ],
        {
          OPENAI4S_OIDC_AUDIENCE: "openai4s",
          OPENAI4S_OIDC_JWKS_FILE: "keys.json",
        },
      ),
    ).toMatchObject({
      siteIdentity: {
        oidc: {
          issuer: "https://id.example.org/realms/hpc",
          audience: "openai4s",
          userClaim: "preferred_username",
          jwksFile: "/srv/o4s/keys.json",
          jwksUri: null,
        },
        munge: { socket: null, createPrincipals: false },
        usersSocket: "/srv/o4s/u.sock",
      },
    });
    const refused: [string[], string][] = [
      [["--oidc-issuer", "https://id.example.org"], "--oidc-audience"],
      [["--oidc-issuer", "http://id.example.org", "--oidc-audience", "a"], "must be https"],
      [["--oidc-audience", "a"], "--oidc-audience needs --oidc-issuer"],
      [["--munge-create-principals"], "needs --munge"],
    ];
    for (const [args, words] of refused) expect(() => parse(args)).toThrow(words);
    // Plain http on loopback is allowed (a test issuer, a local proxy).
    expect(parse(["--oidc-issuer", "http://127.0.0.1:8080", "--oidc-audience", "a"])).toMatchObject(
      { siteIdentity: { oidc: { issuer: "http://127.0.0.1:8080" } } },
    );
  });

  test("--principal-max-* (else the environment) are the limits of new principals", () => {
    expect(
      parse(["--principal-max-sessions", "2", "--principal-max-gpus", "0"], {
        OPENAI4S_PRINCIPAL_MAX_BATCH: "5",
      }),
    ).toMatchObject({
      principalDefaults: { maxSessions: 2, maxBatch: 5, maxCpus: null, maxGpus: 0 },
    });
    expect(() => parse(["--principal-max-cpus", "1e3"], {})).toThrow(/--principal-max-cpus/);
  });

  test("--allow-unsandboxed-batch is an explicit opt-in, off unless named", () => {
    expect(parse(["--allow-unsandboxed-batch"], {}, 1000)).toMatchObject({
      allowUnsandboxedBatch: true,
    });
    expect(parse([], {}, 1000)).toMatchObject({ allowUnsandboxedBatch: false });
  });

  test("--spool-dir, else $OPENAI4S_SPOOL_DIR, resolved; --allow-network-db", () => {
    expect(
      parse(["--spool-dir", "sp", "--allow-network-db"], { OPENAI4S_SPOOL_DIR: "/e" }),
    ).toMatchObject({ spoolDir: "/srv/o4s/sp", allowNetworkDb: true });
    expect(parse([], { OPENAI4S_SPOOL_DIR: "/e" })).toMatchObject({ spoolDir: "/e" });
    expect(() => parse(["--spool-dir", ""])).toThrow(UsageError);
  });

  test("--spool-low-water: a size in bytes or K/M/G/T, 0 for off; anything else names the flag", () => {
    expect(parse(["--spool-low-water", "2G"])).toMatchObject({ spoolLowWaterBytes: 2 * 1024 ** 3 });
    expect(parse(["--spool-low-water", "500MiB"])).toMatchObject({
      spoolLowWaterBytes: 500 * 1024 ** 2,
    });
    expect(parse(["--spool-low-water", "4096"])).toMatchObject({ spoolLowWaterBytes: 4096 });
    expect(parse(["--spool-low-water", "0"])).toMatchObject({ spoolLowWaterBytes: 0 });
    for (const bad of ["", "-1", "1.5G", "2X", "lots", "9999999999T"]) {
      expect(() => parse(["--spool-low-water", bad])).toThrow(/--spool-low-water/);
    }
  });

  test("--run-as: jobs of a root daemon run as the named uid/gid, never uid 0", () => {
    const fixed = (uid: number, gid: number = uid) => ({
      identity: { kind: "Fixed", runAs: { uid, gid } },
    });
    expect(parse(["--run-as", "1234"])).toMatchObject(fixed(1234));
    expect(parse(["--run-as", "1234:99"])).toMatchObject(fixed(1234, 99));
    expect(parse([], { OPENAI4S_RUN_AS: "4321" })).toMatchObject(fixed(4321));
    expect(parse(["--run-as", "nobody"])).toMatchObject({ identity: { runAs: NOBODY } });
    // The flag wins over the environment.
    expect(parse(["--run-as", "7"], { OPENAI4S_RUN_AS: "8" })).toMatchObject(fixed(7));
    for (const root of ["0", "root", "0:0", "1000:0", "root:1000"]) {
      expect(() => parse(["--run-as", root])).toThrow(UsageError);
    }
    expect(() => parse([], { OPENAI4S_RUN_AS: "0" })).toThrow(/uid 0/);
    expect(() => parse(["--run-as", "no-such-user-o4s"])).toThrow(/no user named/);
    expect(() => parse(["--run-as", "1:2:3"])).toThrow(UsageError);
    expect(() => parse(["--run-as", ""])).toThrow(UsageError);
  });

  test("--uid-range: a root daemon leases a uid per workload from it, never uid 0", () => {
    const leased = (first: number, last: number) => ({
      identity: { kind: "Leased", range: { first, last } },
    });
    expect(parse(["--uid-range", "70000-70999"])).toMatchObject(leased(70000, 70999));
    expect(parse([], { OPENAI4S_UID_RANGE: "5000-5009" })).toMatchObject(leased(5000, 5009));
    expect(parse(["--uid-range", "7-9"], { OPENAI4S_UID_RANGE: "5000-5009" })).toMatchObject(
      leased(7, 9),
    );
    expect(() => parse(["--uid-range", "0-100"])).toThrow(/uid 0/);
    for (const bad of ["100", "100-100", "200-100", "a-b", "1-4294967295", "-5"]) {
      expect(() => parse(["--uid-range", bad])).toThrow(UsageError);
    }
    expect(() => parse(["--uid-range", "7000-7009", "--run-as", "nobody"])).toThrow(/choose one/);
    expect(() => parse(["--uid-range", "7000-7009"], {}, 1000)).toThrow(
      /only a daemon running as root/,
    );
  });

  test("a daemon that is not root keeps its own uid and refuses another", () => {
    const own = { identity: { kind: "DaemonUid" } };
    expect(parse([], {}, 1000)).toMatchObject(own);
    expect(parse(["--run-as", "1000"], {}, 1000)).toMatchObject(own);
    expect(() => parse(["--run-as", "nobody"], {}, 1000)).toThrow(/only a daemon running as root/);
  });

  test("pacing flags: the polling ceiling, the back-off maximum and the command bound", () => {
    const options = parse([
      "--poll-min-ms",
      "500",
      "--poll-max-ms",
      "60000",
      "--max-commands",
      "3",
    ]);
    expect(options).toMatchObject({
      pacing: { minIntervalMs: 500, maxIntervalMs: 60_000, maxCommandsInFlight: 3 },
    });
    expect(() => parse(["--poll-min-ms", "0"])).toThrow(UsageError);
    expect(() => parse(["--poll-min-ms", "1.5"])).toThrow(UsageError);
    expect(() => parse(["--max-commands", "1"])).toThrow(UsageError);
    expect(() => parse(["--poll-min-ms", "5000", "--poll-max-ms", "1000"])).toThrow(
      "--poll-max-ms must not be below --poll-min-ms",
    );
  });

  test("repeatable --listen adds to the state dir's socket; paths resolved; cluster config absolute", () => {
    const options = parse([
      "--state-dir",
      "st",
      "--listen",
      "unix:a.sock",
      "--listen",
      "127.0.0.1:8080",
      "--listen",
      "[::1]:8081",
      "--cluster-config",
      "c.toml",
    ]);
    expect(options).toMatchObject({
      stateDir: "/srv/o4s/st",
      listen: [
        { kind: "unix", path: "/srv/o4s/st/api.sock" },
        { kind: "unix", path: "/srv/o4s/a.sock" },
        { kind: "tcp", host: "127.0.0.1", port: 8080 },
        { kind: "tcp", host: "::1", port: 8081 },
      ],
      clusterConfigPath: "/srv/o4s/c.toml",
    });
  });

  test("a non-loopback address needs --allow-remote", () => {
    expect(() => parse(["--listen", "0.0.0.0:8080"])).toThrow(/--allow-remote/);
    expect(
      parse(["--state-dir", "/s", "--listen", "0.0.0.0:8080", "--allow-remote"]),
    ).toMatchObject({
      listen: [
        { kind: "unix", path: "/s/api.sock" },
        { kind: "tcp", host: "0.0.0.0", port: 8080 },
      ],
    });
  });

  test("--tls-cert and --tls-key: both, relative to the working dir, and only with a TCP --listen", () => {
    expect(
      parse(["--listen", "127.0.0.1:8470", "--tls-cert", "c.pem", "--tls-key", "/k.pem"]),
    ).toMatchObject({ listenTls: { certPath: "/srv/o4s/c.pem", keyPath: "/k.pem" } });
    expect(() => parse(["--listen", "127.0.0.1:8470", "--tls-cert", "c.pem"])).toThrow(
      /--tls-cert and --tls-key go together/,
    );
    // A pair with no TCP listener would leave the admin thinking tokens travel encrypted.
    expect(() => parse(["--tls-cert", "c.pem", "--tls-key", "k.pem"])).toThrow(
      /for a TCP --listen HOST:PORT; none is given/,
    );
  });

  test("the state dir's socket named with --listen is served once", () => {
    expect(parse(["--state-dir", "/s", "--listen", "unix:/s/api.sock"])).toMatchObject({
      listen: [{ kind: "unix", path: "/s/api.sock" }],
    });
  });

  test("--max-upload-size is a size; nonsense and zero are refused naming the flag", () => {
    expect(parse(["--max-upload-size", "64G"])).toMatchObject({ maxUploadBytes: 64 * 1024 ** 3 });
    expect(parse(["--max-upload-size", "500M"])).toMatchObject({ maxUploadBytes: 500 * 1024 ** 2 });
    expect(parse([])).not.toHaveProperty("maxUploadBytes");
    expect(() => parse(["--max-upload-size", "0"])).toThrow(/--max-upload-size/);
    expect(() => parse(["--max-upload-size", "lots"])).toThrow(/--max-upload-size/);
  });

  test("--body-timeout-ms is a whole number of milliseconds", () => {
    expect(parse(["--body-timeout-ms", "2500"])).toMatchObject({ bodyTimeoutMs: 2500 });
    expect(() => parse(["--body-timeout-ms", "0"])).toThrow(/--body-timeout-ms/);
    expect(() => parse(["--body-timeout-ms", "5s"])).toThrow(/--body-timeout-ms/);
  });

  test.each([
    [["--listen", "nonsense"], "--listen"],
    [["--backend", "nope"], "--backend"],
    [["--log-level", "loud"], "--log-level"],
    [["--frobnicate"], "--frobnicate"],
    [["extra"], "extra"],
    [["--state-dir"], "--state-dir"],
  ])("%p is a usage error naming %s", (args, named) => {
    expect(() => parse(args)).toThrow(UsageError);
    expect(() => parse(args)).toThrow(named);
  });

  test("through main: usage errors exit 2 before anything starts", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["serve", "--listen", "10.1.2.3:80"], io)).toBe(2);
    expect(io.err()).toContain("--allow-remote");
  });

  test("--help lists every registered backend and exits 0", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["serve", "--help"], io)).toBe(0);
    for (const backend of BACKENDS) {
      expect(io.out()).toContain(backend.name);
      expect(io.out()).toContain(backend.describe);
    }
    expect(io.out()).toContain("--allow-remote");
  });
});

describe("serve's configuration: flags and environment in one parse", () => {
  const config = (args: string[], env: Record<string, string>) =>
    parseServeConfig(args, env, "/srv/o4s", "/home/ada", ["/opt/openai4s"], {
      daemonUid: 0,
      accounts: systemAccounts(systemClock),
    });

  test("the flags' options and the environment's settings, typed, in one object", () => {
    const parsed = config(["--state-dir", "/s", "--poll-min-ms", "500"], {
      OPENAI4S_ORPHAN_POLICY: "cancel",
      OPENAI4S_LOCAL_MEMORY_MB: "300",
    });
    expect(parsed.kind).toBe("Parsed");
    if (parsed.kind !== "Parsed") return;
    expect(parsed.options).toMatchObject({ stateDir: "/s", pacing: { minIntervalMs: 500 } });
    expect(parsed.settings.orphanSweep.policy).toBe("cancel");
    expect(parsed.settings.backends["local"]).toMatchObject({ knobs: { memoryMb: 300 } });
    expect(parsed.settings.sessions.workerCommand).toEqual(["/opt/openai4s", "worker"]);
  });

  test("--help is help, whatever the environment holds", () => {
    expect(config(["--help"], { OPENAI4S_ORPHAN_POLICY: "ignore" })).toEqual({ kind: "Help" });
  });

  test("a bad flag is a usage error naming it; bad variables are all named together", () => {
    expect(() => config(["--poll-min-ms", "0"], {})).toThrow(/--poll-min-ms/);
    const parsed = config([], { OPENAI4S_ORPHAN_POLICY: "ignore", OPENAI4S_LOCAL_NETWORK: "off" });
    expect(parsed.kind).toBe("Invalid");
    if (parsed.kind !== "Invalid") return;
    expect(parsed.errors.map((e) => e.variable).sort()).toEqual([
      "OPENAI4S_LOCAL_NETWORK",
      "OPENAI4S_ORPHAN_POLICY",
    ]);
  });

  test("through main: a bad variable exits 2 naming it, before the state dir is made", async () => {
    const io = captureIo({ OPENAI4S_LOCAL_PIDS_MAX: "lots" });
    const stateDir = "/nonexistent-o4s-serve-config/state";
    expect(await main("openai4s", ["serve", "--state-dir", stateDir], io)).toBe(2);
    expect(io.err()).toContain("OPENAI4S_LOCAL_PIDS_MAX");
    expect(existsSync("/nonexistent-o4s-serve-config")).toBe(false);
  });
});
