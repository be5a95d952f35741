/**
 * The local backend's profiles file (OPENAI4S_LOCAL_PROFILES): each key read into its
 * profile, `network` left out is `none` (unless OPENAI4S_LOCAL_NETWORK says otherwise), the
 * daemon's knobs are the defaults of what a profile leaves out, and every mistake is refused
 * naming the file, the line and the key. Through the binary: a bad file stops the daemon
 * (exit 2), and a good one's profiles are what `GET /v1/profiles` lists, with their network.
 */
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { LOCAL_PROFILES_ENV } from "../../src/adapters/backend-local/settings.ts";
import { readTomlSubset } from "../../src/lib/toml/cross-check.ts";
import { BINARY, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { localProfilesFromEnv } from "../support/local-profiles.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-local-profiles-", "each");

function load(text: string, env: Record<string, string> = {}) {
  return localProfilesFromEnv(env, {
    name: "/etc/openai4s/local.toml",
    read: readTomlSubset(text),
  });
}

const TWO = `# two profiles
[profiles.sealed]
description = "No network"
cpus = 1
memory_mb = 512
pids_max = 64
time_limit_minutes = 30
warn_minutes_before_limit = 2
max_array_size = 0
allow_batch = true

[profiles.open]
description = "The host's network"
network = "host"
allow_batch = true
allow_sessions = true
`;

describe("a profiles file", () => {
  test("max_array_size: absent, the default 1000; 0, no arrays; a number, that limit", () => {
    const limit = (line: string) => {
      const loaded = load(`[profiles.a]\ndescription = "a"\n${line}\nallow_batch = true\n`);
      return loaded.kind === "Valid" ? loaded.profiles[0]?.maxArraySize : loaded.message;
    };
    expect(limit("")).toBe(1000);
    expect(limit("max_array_size = 0")).toBeUndefined();
    expect(limit("max_array_size = 25")).toBe(25);
    expect(limit("max_array_size = 10001")).toContain(
      ":3: profiles.a.max_array_size must be from 0 to 10000",
    );
  });

  test("max_cpus, max_memory_mb, max_time_limit_minutes: how far a workload may raise the defaults", () => {
    const read = (lines: string) => {
      const loaded = load(
        `[profiles.a]\ndescription = "a"\ncpus = 1\nmemory_mb = 256\ntime_limit_minutes = 10\n${lines}allow_batch = true\n`,
      );
      return loaded.kind === "Valid" ? loaded.profiles[0]?.maxima : loaded.message;
    };
    expect(read("")).toBeUndefined();
    expect(
      read(
        `max_cpus = ${availableParallelism()}\nmax_memory_mb = 1024\nmax_time_limit_minutes = 60\n`,
      ),
    ).toEqual({
      cpus: availableParallelism(),
      memoryMb: 1024,
      timeLimitSeconds: 3600,
    });
    expect(read("max_memory_mb = 255\n")).toBe(
      "/etc/openai4s/local.toml:6: [profiles.a] max_memory_mb (255) is below memory_mb (256)",
    );
    expect(read("max_time_limit_minutes = 9\n")).toBe(
      "/etc/openai4s/local.toml:6: [profiles.a] max_time_limit_minutes (9) is below time_limit_minutes (10)",
    );
    const untimed = load(
      '[profiles.a]\ndescription = "a"\nmax_time_limit_minutes = 9\nallow_batch = true\n',
    );
    expect(untimed.kind === "ConfigError" && untimed.message).toBe(
      "/etc/openai4s/local.toml:3: [profiles.a] max_time_limit_minutes needs time_limit_minutes (the limit of a workload that asks for none)",
    );
    // GPUs are not this machine's to give: no max_gpus.
    expect(read("max_gpus = 1\n")).toContain('unknown key "max_gpus"');
  });

  test("each key lands in its profile; network left out is none", () => {
    const loaded = load(TWO, { OPENAI4S_LOCAL_MEMORY_MB: "2048" });
    expect(loaded.kind).toBe("Valid");
    if (loaded.kind !== "Valid") return;
    const [sealed, open] = loaded.profiles;
    expect(sealed).toEqual({
      name: "sealed",
      description: "No network",
      kinds: ["BATCH"],
      resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: 512, timeLimitSeconds: 1800 },
      pidsMax: 64,
      network: "none",
      warnBeforeLimitSeconds: 120,
    });
    // What a profile leaves out: the machine's CPUs, the daemon's knobs, the built-in pids.
    expect(open).toEqual({
      name: "open",
      description: "The host's network",
      kinds: ["SESSION", "BATCH"],
      resources: {
        nodes: 1,
        cpus: availableParallelism(),
        gpus: 0,
        memoryMb: 2048,
        timeLimitSeconds: null,
      },
      pidsMax: 4096,
      network: "host",
      maxArraySize: 1000,
    });
  });

  test("OPENAI4S_LOCAL_NETWORK is the default of a profile that does not say", () => {
    const loaded = load(TWO, { OPENAI4S_LOCAL_NETWORK: "host" });
    expect(loaded.kind === "Valid" && loaded.profiles.map((p) => p.network)).toEqual([
      "host",
      "host",
    ]);
  });

  test("without a file: the one default profile, network host as before", () => {
    const loaded = localProfilesFromEnv({});
    expect(loaded.kind === "Valid" && loaded.profiles.map((p) => [p.name, p.network])).toEqual([
      ["default", "host"],
    ]);
  });

  const REFUSED: readonly (readonly [string, string, string])[] = [
    [
      "a misspelt key",
      `[profiles.a]\ndescription = "a"\nnetwrok = "host"\nallow_batch = true\n`,
      ':3: unknown key "netwrok" in [profiles.a]',
    ],
    [
      "a network that is neither",
      `[profiles.a]\ndescription = "a"\nnetwork = "open"\nallow_batch = true\n`,
      ':3: profiles.a.network must be "host" or "none"',
    ],
    [
      "a string where a number goes",
      `[profiles.a]\ndescription = "a"\ncpus = "2"\nallow_batch = true\n`,
      ":3: profiles.a.cpus must be an integer",
    ],
    [
      "more CPUs than the machine",
      `[profiles.a]\ndescription = "a"\ncpus = 100000\nallow_batch = true\n`,
      `:3: profiles.a.cpus must be from 1 to ${availableParallelism()}`,
    ],
    [
      "too few processes",
      `[profiles.a]\ndescription = "a"\npids_max = 3\nallow_batch = true\n`,
      ":3: profiles.a.pids_max must be from 16",
    ],
    [
      "no kind of work",
      `[profiles.a]\ndescription = "a"\n`,
      ":1: [profiles.a] allows no kind of work",
    ],
    ["no description", `[profiles.a]\nallow_batch = true\n`, ":1: [profiles.a] has no description"],
    [
      "a key outside [profiles]",
      `partition = "x"\n[profiles.a]\ndescription = "a"\nallow_batch = true\n`,
      ':1: unknown key "partition"',
    ],
    ["no profile", "# nothing\n", ":1: no profile is defined"],
    [
      "a bad profile name",
      `[profiles."a b"]\ndescription = "a"\nallow_batch = true\n`,
      ':1: profile name "a b" must match',
    ],
    ["TOML outside the subset", `[profiles.a]\ndescription = "a"\ncpus = 1.5\n`, ":3: "],
  ];

  test.each(REFUSED)("refused, naming file, line and key: %s", (_what, text, why) => {
    const loaded = load(text);
    expect(loaded.kind).toBe("ConfigError");
    if (loaded.kind !== "ConfigError") return;
    expect(loaded.message).toStartWith("/etc/openai4s/local.toml:");
    expect(loaded.message).toContain(why);
  });
});

describe("the daemon and its profiles file", () => {
  test("a bad file stops it at start (exit 2), naming file and line", () => {
    ensureBuilt();
    const dir = tempDir();
    const file = join(dir, "local.toml");
    writeFileSync(file, `[profiles.a]\ndescription = "a"\nnetwork = "open"\nallow_batch = true\n`);
    for (const [value, why] of [
      [file, `${file}:3: profiles.a.network must be "host" or "none"`],
      ["relative.toml", `${LOCAL_PROFILES_ENV}="relative.toml": not an absolute path`],
      [join(dir, "missing.toml"), "cannot read it (ENOENT)"],
    ] as const) {
      const r = Bun.spawnSync([BINARY, "serve", "--state-dir", join(dir, "state")], {
        env: { PATH: "/usr/bin:/bin", HOME: dir, [LOCAL_PROFILES_ENV]: value },
        stdout: "pipe",
        stderr: "pipe",
      });
      expect({ code: r.exitCode, err: r.stderr.toString().includes(why) }).toEqual({
        code: 2,
        err: true,
      });
    }
  });

  test("its profiles are what GET /v1/profiles lists, each with its network", async () => {
    ensureBuilt();
    const file = join(tempDir(), "local.toml");
    writeFileSync(file, TWO);
    const d = await startDaemon({ gateway: false, env: { [LOCAL_PROFILES_ENV]: file } });
    try {
      const response = await fetch("http://localhost/v1/profiles", { unix: d.socket });
      const body = (await response.json()) as { profiles: { name: string; network: string }[] };
      expect(body.profiles.map((p) => [p.name, p.network])).toEqual([
        ["sealed", "none"],
        ["open", "host"],
      ]);
      const listed = await d.cli("profiles");
      expect(listed.stdout).toMatch(/sealed .* none /);
    } finally {
      await d.stop();
    }
  });
});
