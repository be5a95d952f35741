/**
 * The largest array a profile takes is the site's MaxArraySize (scontrol show config), read
 * through the broker; Slurm's default stands only until the controller answered.
 */
import { describe, expect, test } from "bun:test";
import type { PlacementCatalog } from "../../src/adapters/backend-slurm/backend.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { parseSiteConfig } from "../../src/adapters/backend-slurm/parse-site-config.ts";
import { DEFAULT_MAX_ARRAY_SIZE } from "../../src/adapters/backend-slurm/profiles.ts";
import { createSiteArrayLimit } from "../../src/adapters/backend-slurm/site-array-limit.ts";
import { silentLog } from "../../src/lib/log.ts";
import type { ProcessOutcome, ProgramRunner } from "../../src/lib/process-runner.ts";
import { BASE_PLACEMENT, catalog } from "../support/slurm-fixtures.ts";

const CONFIG = (maxArraySize: string) =>
  [
    "Configuration data as of 2026-12-01T18:27:51",
    "AccountingStorageBackupHost = (null)",
    `MaxArraySize            = ${maxArraySize}`,
    "MaxJobCount             = 10000",
    "",
    "Cgroup Support Configuration:",
    "AllowedDevicesFile      = /etc/slurm/cgroup_allowed_devices_file.conf",
    "",
  ].join("\n");

function scontrolAnswering(stdout: string | null) {
  const calls: (readonly string[])[] = [];
  const runner: ProgramRunner = {
    async run(request): Promise<ProcessOutcome> {
      calls.push([request.program, ...request.args]);
      return stdout === null
        ? {
            kind: "Exited",
            exitCode: 1,
            signal: null,
            stdout: "",
            stderr:
              "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n",
            truncated: [],
            durationMs: 0,
          }
        : {
            kind: "Exited",
            exitCode: 0,
            signal: null,
            stdout,
            stderr: "",
            truncated: [],
            durationMs: 0,
          };
    },
  };
  return { broker: createSlurmBroker({ runner, path: "/usr/bin:/bin" }), calls };
}

// As the cluster.toml loader shows them: a BATCH profile with Slurm's default array limit,
// a sessions-only one with none (it takes no arrays, whatever the site allows).
const FIXTURE = catalog({ batch: BASE_PLACEMENT, sessions: BASE_PLACEMENT });
const BASE: PlacementCatalog = {
  profiles: () =>
    FIXTURE.profiles().map((p) =>
      p.name === "batch" ? { ...p, maxArraySize: DEFAULT_MAX_ARRAY_SIZE } : p,
    ),
  placement: (name) => FIXTURE.placement(name),
};
const limitOf = (c: ReturnType<typeof BASE.profiles>) =>
  c.find((p) => p.name === "batch")?.maxArraySize;

describe("the site's MaxArraySize", () => {
  test("a site that raised it: profiles take arrays that large, after one scontrol", async () => {
    const { broker, calls } = scontrolAnswering(CONFIG("100001"));
    const limit = createSiteArrayLimit({ broker, log: silentLog, retryMs: 60_000 });
    const wrapped = limit.catalog(BASE);
    expect(limitOf(wrapped.profiles())).toBe(DEFAULT_MAX_ARRAY_SIZE);
    expect(await limit.readOnce()).toBe(true);
    expect(limitOf(wrapped.profiles())).toBe(100_001);
    expect(calls).toEqual([["scontrol", "show", "config"]]);
    expect(broker.callCounts().scontrol).toBe(1);
    expect(wrapped.placement("batch")).toBe(BASE.placement("batch"));
  });

  test("a site that lowered it, or turned arrays off", async () => {
    for (const [value, shown] of [
      ["50", 50],
      ["0", undefined],
    ] as const) {
      const limit = createSiteArrayLimit({
        broker: scontrolAnswering(CONFIG(value)).broker,
        log: silentLog,
        retryMs: 60_000,
      });
      await limit.readOnce();
      const [profile, sessions] = limit.catalog(BASE).profiles();
      expect(sessions?.maxArraySize).toBeUndefined();
      expect(profile?.maxArraySize).toBe(shown);
      expect("maxArraySize" in (profile ?? {})).toBe(shown !== undefined);
    }
  });

  test("no answer keeps Slurm's default and says so; it is asked again", async () => {
    const limit = createSiteArrayLimit({
      broker: scontrolAnswering(null).broker,
      log: silentLog,
      retryMs: 60_000,
    });
    expect(await limit.readOnce()).toBe(false);
    expect(limit.known()).toBeNull();
    expect(limitOf(limit.catalog(BASE).profiles())).toBe(DEFAULT_MAX_ARRAY_SIZE);
  });

  test("the parser: a value that is not a count is no answer, an absent one is null", () => {
    expect(parseSiteConfig(CONFIG("1001"))).toEqual({
      kind: "Parsed",
      value: { maxArraySize: 1001 },
    });
    expect(parseSiteConfig("Configuration data as of x\n")).toEqual({
      kind: "Parsed",
      value: { maxArraySize: null },
    });
    for (const bad of ["-1", "lots", "99999999", ""]) {
      expect(parseSiteConfig(CONFIG(bad)).kind).toBe("Malformed");
    }
  });
});
