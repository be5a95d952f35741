import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import {
  type ClusterConfigLoad,
  formatRefusal,
  loadClusterConfig,
  MAX_CLUSTER_CONFIG_BYTES,
  parseClusterConfig,
  probeArgv,
  resourceOptions,
} from "../../src/adapters/backend-slurm/profiles.ts";
import {
  createSbatchTestRun,
  judgePreflight,
  preflightArgv,
  preflightProfiles,
  type SbatchTestAnswer,
} from "../../src/adapters/backend-slurm/profiles-preflight.ts";
import { eventually } from "../support/eventually.ts";
import { tempDirs } from "../support/temp-dir.ts";

const EXAMPLE = join(import.meta.dir, "..", "..", "cluster.toml.example");
const tempDir = tempDirs("o4s-profiles-");

function loaded(result: ClusterConfigLoad) {
  if (result.kind !== "Loaded") throw new Error(`not loaded: ${JSON.stringify(result)}`);
  return result;
}

function refused(result: ClusterConfigLoad) {
  if (result.kind !== "Refused") throw new Error(`not refused: ${JSON.stringify(result)}`);
  return result;
}

const MINIMAL = '[profiles.p]\ndescription = "d"\nallow_batch = true\n';

describe("cluster.toml.example", () => {
  test("passes, and maps what it documents", () => {
    const config = loaded(loadClusterConfig({ path: EXAMPLE }));
    expect(config.profiles.map((p) => p.name)).toEqual(["gpu-interactive", "cpu-batch", "default"]);
    const gpu = config.profiles[0];
    expect(gpu?.placement).toEqual({
      partition: "gpu",
      qos: "interactive",
      account: "physics", // from [cluster]
      nodes: 1,
      cpus: 4,
      gpus: 1,
      memoryMb: 1000,
      timeLimitSeconds: 240 * 60,
      maxima: { cpus: 16, gpus: 2, memoryMb: 64000, timeLimitSeconds: 720 * 60 },
      warnBeforeLimitSeconds: 10 * 60,
    });
    expect(gpu?.public()).toEqual({
      name: "gpu-interactive",
      description: "One GPU for interactive work (sessions and short jobs)",
      kinds: ["SESSION", "BATCH"],
      resources: { nodes: 1, cpus: 4, gpus: 1, memoryMb: 1000, timeLimitSeconds: 14400 },
      maxima: { cpus: 16, gpus: 2, memoryMb: 64000, timeLimitSeconds: 43200 },
      maxArraySize: 1001,
      // Not a scheduler name: the reconciler's TIME_LIMIT_NEAR lead, never shown by the API.
      warnBeforeLimitSeconds: 600,
    });
    expect(gpu?.describeMapping()[0]).toBe(
      "partition gpu, QoS interactive, account physics (from [cluster])",
    );
    expect(config.catalog.placement("cpu-batch")?.nodes).toBe(2);
    // Multi-node BATCH: the bound admission checks (public) and srun's plugin (never shown).
    expect(config.catalog.placement("cpu-batch")).toMatchObject({ maxTasks: 16, mpi: "pmi2" });
    const cpuBatch = config.profiles[1]?.public();
    expect(cpuBatch?.maxTasks).toBe(16);
    expect(JSON.stringify(cpuBatch)).not.toContain("pmi2");
    expect(config.catalog.placement("nope")).toBeNull();
  });

  test("documents every key the loader knows", () => {
    const text = readFileSync(EXAMPLE, "utf8");
    for (const key of [
      "partition",
      "qos",
      "account",
      "description",
      "nodes",
      "cpus",
      "gpus",
      "memory_mb",
      "max_tasks",
      "mpi",
      "time_limit_minutes",
      "max_cpus",
      "max_gpus",
      "max_memory_mb",
      "max_time_limit_minutes",
      "allow_batch",
      "allow_sessions",
    ]) {
      expect(text).toMatch(new RegExp(`^#? ?${key} = `, "m"));
    }
  });
});

describe("refusals name the key and its line", () => {
  test.each([
    [
      "a misspelt key",
      `${MINIMAL}partiton = "gpu"\n`,
      4,
      /unknown key "partiton" in \[profiles\.p\]/,
    ],
    ["a float", `${MINIMAL}gpus = 1.5\n`, 4, /profiles\.p\.gpus: 1\.5 is a float/],
    ["an array", `${MINIMAL}kinds = ["BATCH"]\n`, 4, /profiles\.p\.kinds: arrays/],
    [
      "a string for an integer",
      `${MINIMAL}nodes = "2"\n`,
      4,
      /profiles\.p\.nodes must be an integer, not a string/,
    ],
    ["an integer for a boolean", `${MINIMAL}allow_sessions = 1\n`, 4, /must be a boolean/],
    ["zero nodes", `${MINIMAL}nodes = 0\n`, 4, /profiles\.p\.nodes must be an integer in 1\.\./],
    ["negative GPUs", `${MINIMAL}gpus = -1\n`, 4, /gpus must be an integer in 0\.\./],
    [
      "zero tasks",
      `${MINIMAL}max_tasks = 0\n`,
      4,
      /profiles\.p\.max_tasks must be an integer in 1\.\./,
    ],
    [
      "an option in the MPI plugin",
      `${MINIMAL}mpi = "pmi2 --x"\n`,
      4,
      /profiles\.p\.mpi must name/,
    ],
    [
      "a comma in a partition",
      `${MINIMAL}partition = "gpu,debug"\n`,
      4,
      /profiles\.p\.partition must match/,
    ],
    ["a space in a QoS", `${MINIMAL}qos = "a b"\n`, 4, /profiles\.p\.qos must match/],
    [
      "shell in an account",
      `${MINIMAL}account = "x; rm -rf /"\n`,
      4,
      /profiles\.p\.account must match/,
    ],
    [
      "a multi-line description",
      '[profiles.p]\ndescription = "a\\nb"\nallow_batch = true\n',
      2,
      /one line/,
    ],
    [
      "an empty description",
      '[profiles.p]\ndescription = " "\nallow_batch = true\n',
      2,
      /must not be empty/,
    ],
    [
      "no description",
      "[profiles.p]\nallow_batch = true\n",
      1,
      /\[profiles\.p\] has no description/,
    ],
    ["no kind", '[profiles.p]\ndescription = "d"\n', 1, /allows no kind of work/],
    ["a sub-table", `${MINIMAL}[profiles.p.extra]\n`, 4, /unknown table \[profiles\.p\.extra\]/],
    [
      "an unquoted dotted name",
      '[profiles.gpu.a100]\ndescription = "d"\n',
      1,
      /unknown table \[profiles\.gpu\.a100\]/,
    ],
    [
      "a bad profile name",
      '[profiles."-x"]\ndescription = "d"\nallow_batch = true\n',
      1,
      /profile name "-x"/,
    ],
    ["an unknown top-level table", `${MINIMAL}[clusters]\n`, 4, /unknown table "clusters"/],
    ["a prototype-named key", `${MINIMAL}toString = 1\n`, 4, /unknown key "toString"/],
    ["an unknown top-level key", `version = 1\n${MINIMAL}`, 1, /unknown key "version"/],
    [
      "an unknown [cluster] key",
      `[cluster]\npartitions = "x"\n${MINIMAL}`,
      2,
      /unknown key "partitions" in \[cluster\]/,
    ],
    ["profiles as a value", 'profiles = "p"\n', 1, /profiles must be a table/],
    ["a profile as a value", '[profiles]\np = "x"\n', 2, /profiles\.p must be a table/],
    ["no profile at all", '[cluster]\naccount = "a"\n', 1, /no profile is defined/],
    ["an empty file", "", 1, /no profile is defined/],
  ])("%s", (_label, text, line, why) => {
    const r = refused(parseClusterConfig(text));
    expect(r.line).toBe(line);
    expect(r.message).toMatch(why);
  });

  test("the first problem by position wins, whatever order the checks run in", () => {
    const text = `[profiles.b]\ndescription = "d"\nallow_batch = true\nbogus = 1\n[profiles.a]\nallow_batch = true\ncpus = 0\n`;
    const r = refused(parseClusterConfig(text));
    expect(r.line).toBe(4);
    expect(r.key).toBe("profiles.b.bogus");
  });

  test("FILE:LINE:COLUMN: message", () => {
    const r = refused(parseClusterConfig(`${MINIMAL}  qos = 7\n`));
    expect(formatRefusal("c.toml", r)).toBe(
      "c.toml:4:3: profiles.p.qos must be a string, not an integer",
    );
    expect(formatRefusal("c.toml", { ...r, column: null })).toBe(
      "c.toml:4: profiles.p.qos must be a string, not an integer",
    );
  });

  const KNOWN = new Set([
    "description",
    "partition",
    "qos",
    "account",
    "nodes",
    "cpus",
    "gpus",
    "memory_mb",
    "time_limit_minutes",
    "allow_batch",
    "allow_sessions",
  ]);

  test("an unknown key planted anywhere in a profile is refused by name, at its line", () => {
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/), { minLength: 1, maxLength: 4 }),
        fc.stringMatching(/^[a-z_][a-z0-9_]{0,12}$/).filter((k) => !KNOWN.has(k)),
        fc.nat(),
        fc.nat(),
        (rawNames, unknown, which, offset) => {
          const names = [...new Set(rawNames)];
          const blocks = names.map((n) => [
            `[profiles.${n}]`,
            `description = "profile ${n}"`,
            "cpus = 2",
            "allow_batch = true",
          ]);
          const target = which % blocks.length;
          const block = blocks[target] as string[];
          const at = 1 + (offset % block.length); // after the header
          block.splice(at, 0, `${unknown} = 1`);
          const lines = blocks.flat();
          const line = 1 + blocks.slice(0, target).flat().length + at;
          const r = refused(parseClusterConfig(`${lines.join("\n")}\n`));
          expect(r.line).toBe(line);
          expect(r.key).toBe(`profiles.${names[target]}.${unknown}`);
          expect(r.message).toContain(`unknown key "${unknown}"`);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("maxima (issue 35)", () => {
  test("max_ keys bound what a workload may ask; the public view and the placement carry them", () => {
    const config = loaded(
      parseClusterConfig(
        `${MINIMAL}cpus = 2\nmemory_mb = 500\ntime_limit_minutes = 10\nmax_cpus = 4\nmax_gpus = 2\nmax_memory_mb = 1000\nmax_time_limit_minutes = 30\n`,
      ),
    );
    const maxima = { cpus: 4, gpus: 2, memoryMb: 1000, timeLimitSeconds: 1800 };
    expect(config.profiles[0]?.placement.maxima).toEqual(maxima);
    expect(config.profiles[0]?.public().maxima).toEqual(maxima);
    expect(config.profiles[0]?.describeMapping()).toContain(
      "a workload may ask up to 4 CPUs, 2 GPUs, 1000 MB, 30 min",
    );
  });

  test("without max_ keys there are no maxima: the defaults bound", () => {
    const config = loaded(parseClusterConfig(`${MINIMAL}cpus = 2\n`));
    expect(config.profiles[0]?.public().maxima).toBeUndefined();
  });

  test.each([
    [
      "a maximum below its default",
      "cpus = 4\nmax_cpus = 2\n",
      5,
      /max_cpus \(2\) is below cpus \(4\)/,
    ],
    [
      "max_cpus below the default of 1",
      "max_gpus = 0\ngpus = 1\n",
      4,
      /max_gpus \(0\) is below gpus \(1\)/,
    ],
    [
      "a time maximum without a default",
      "max_time_limit_minutes = 30\n",
      4,
      /max_time_limit_minutes needs time_limit_minutes/,
    ],
  ])("%s is refused at its line", (_label, keys, line, why) => {
    const r = refused(parseClusterConfig(`${MINIMAL}${keys}`));
    expect(r.line).toBe(line);
    expect(r.message).toMatch(why);
  });
});

describe("defaults and the mapping", () => {
  test("[cluster] fills what a profile leaves out, and the profile's own value wins", () => {
    const config = loaded(
      parseClusterConfig(
        `[cluster]\npartition = "batch"\nqos = "normal"\naccount = "phys"\n${MINIMAL}qos = "high"\n`,
      ),
    );
    expect(config.profiles[0]?.placement).toMatchObject({
      partition: "batch",
      qos: "high",
      account: "phys",
      nodes: 1,
      cpus: 1,
      gpus: 0,
      memoryMb: null,
      timeLimitSeconds: null,
    });
    expect(config.profiles[0]?.describeMapping()[0]).toBe(
      "partition batch (from [cluster]), QoS high, account phys (from [cluster])",
    );
  });

  test("a quoted dotted profile name stays one name", () => {
    const config = loaded(
      parseClusterConfig('[profiles."gpu.a100"]\ndescription = "d"\nallow_sessions = true\n'),
    );
    expect(config.profiles.map((p) => p.name)).toEqual(["gpu.a100"]);
    expect(config.profiles[0]?.public().kinds).toEqual(["SESSION"]);
  });

  test("the mapping's options are the broker's own", () => {
    const config = loaded(
      parseClusterConfig(
        `${MINIMAL}partition = "gpu"\nnodes = 2\ncpus = 8\ngpus = 1\nmemory_mb = 32000\ntime_limit_minutes = 90\n`,
      ),
    );
    const profile = config.profiles[0];
    if (profile === undefined) throw new Error("no profile");
    expect(profile.describeMapping()[1]).toBe(
      "sbatch --partition=gpu --nodes=2 --ntasks-per-node=1 --cpus-per-task=8 --gres=gpu:1 --mem=32000M --time=90",
    );
  });
});

// Profiles over the whole accepted range, rendered to TOML.
const schedulerName = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,20}$/);
const profileDoc = fc
  .record({
    names: fc.uniqueArray(fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,15}$/), {
      minLength: 1,
      maxLength: 4,
    }),
    defaults: fc.record(
      { partition: schedulerName, qos: schedulerName, account: schedulerName },
      { requiredKeys: [] },
    ),
    profiles: fc.infiniteStream(
      fc.record(
        {
          partition: schedulerName,
          qos: schedulerName,
          account: schedulerName,
          nodes: fc.integer({ min: 1, max: 100_000 }),
          cpus: fc.integer({ min: 1, max: 1_000_000 }),
          gpus: fc.integer({ min: 0, max: 1_000 }),
          memory_mb: fc.integer({ min: 1, max: 2 ** 30 }),
          time_limit_minutes: fc.integer({ min: 1, max: 100_000_000 }),
          allow_sessions: fc.boolean(),
        },
        { requiredKeys: ["allow_sessions"] },
      ),
    ),
  })
  .map(({ names, defaults, profiles }) => {
    const render = (fields: Record<string, unknown>) =>
      Object.entries(fields)
        .map(([k, v]) => `${k} = ${typeof v === "string" ? JSON.stringify(v) : String(v)}`)
        .join("\n");
    const tables = names.map((name) => {
      const fields = profiles.next().value as Record<string, unknown>;
      return `[profiles."${name}"]\ndescription = "About ${name}"\nallow_batch = true\n${render(fields)}`;
    });
    return `[cluster]\n${render(defaults)}\n${tables.join("\n")}\n`;
  });

describe("public() never carries the mapping", () => {
  test("by keys, for every generated profile, whichever way it is serialised", () => {
    fc.assert(
      fc.property(profileDoc, (text) => {
        const config = loaded(parseClusterConfig(text));
        const views = [
          ...config.profiles.map((p) => JSON.parse(JSON.stringify(p.public()))),
          ...config.profiles.map((p) => JSON.parse(JSON.stringify(p))),
          ...JSON.parse(JSON.stringify(config.catalog.profiles())),
          ...JSON.parse(JSON.stringify(config.profiles)),
        ];
        for (const view of views) {
          // maxArraySize is the scheduler's limit on array elements, not a scheduler name.
          expect(Object.keys(view).sort()).toEqual([
            "description",
            "kinds",
            "maxArraySize",
            "name",
            "resources",
          ]);
          expect(Object.keys(view.resources).sort()).toEqual([
            "cpus",
            "gpus",
            "memoryMb",
            "nodes",
            "timeLimitSeconds",
          ]);
        }
      }),
      { numRuns: 200 },
    );
  });

  test("by values: no configured partition, QoS or account string in any public view", () => {
    const secrets = [
      "acct-zq7-default",
      "acct-zq7-own",
      "part-zq7-gpu",
      "part-zq7-cpu",
      "qos-zq7-fast",
      "qos-zq7-slow",
    ];
    const text = [
      "[cluster]",
      'account = "acct-zq7-default"',
      "[profiles.a]",
      'description = "Profile a"',
      'partition = "part-zq7-gpu"',
      'qos = "qos-zq7-fast"',
      "allow_batch = true",
      "allow_sessions = true",
      "[profiles.b]",
      'description = "Profile b"',
      'partition = "part-zq7-cpu"',
      'qos = "qos-zq7-slow"',
      'account = "acct-zq7-own"',
      "allow_batch = true",
      "",
    ].join("\n");
    const config = loaded(parseClusterConfig(text));
    // The mapping is really there (else this test could pass on an empty config)...
    const placements = JSON.stringify(config.profiles.map((p) => p.placement));
    for (const secret of secrets) expect(placements).toContain(secret);
    // ...and no view a caller can get shows any of it, whichever way it is serialised.
    const views = JSON.stringify([
      config.profiles.map((p) => p.public()),
      config.profiles,
      config.catalog.profiles(),
      String(config.profiles[0]),
    ]);
    for (const secret of secrets) expect(views).not.toContain(secret);
  });

  test("every loaded profile is one the broker will submit", () => {
    fc.assert(
      fc.property(profileDoc, (text) => {
        const config = loaded(parseClusterConfig(text));
        for (const profile of config.profiles) {
          expect(resourceOptions(profile.placement).kind).toBe("Valid");
          const probe = probeArgv(profile.placement);
          if (probe.kind !== "Valid") throw new Error(probe.message);
          // And the argv the broker builds for the real thing names the same placement.
          const p = profile.placement;
          if (p.partition !== null) expect(probe.argv).toContain(`--partition=${p.partition}`);
          if (p.qos !== null) expect(probe.argv).toContain(`--qos=${p.qos}`);
          if (p.account !== null) expect(probe.argv).toContain(`--account=${p.account}`);
          expect(probe.argv).toContain(`--nodes=${p.nodes}`);
        }
      }),
      { numRuns: 200 },
    );
  });

  test("the placement is the administrator's: frozen, not shared with callers", () => {
    const config = loaded(parseClusterConfig(MINIMAL));
    const profile = config.profiles[0];
    expect(Object.isFrozen(profile?.placement)).toBe(true);
    expect(Object.isFrozen(profile?.public().resources)).toBe(true);
  });
});

describe("reading the file", () => {
  test("a missing file is unreadable, not refused", () => {
    const r = loadClusterConfig({ path: join(tempDir(), "none.toml") });
    expect(r).toEqual({ kind: "Unreadable", message: "cannot read it (ENOENT)" });
  });

  test("bytes that are not UTF-8 are refused with their line", () => {
    const file = join(tempDir(), "c.toml");
    writeFileSync(
      file,
      Buffer.concat([
        Buffer.from(`${MINIMAL}qos = "`),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('"\n'),
      ]),
    );
    expect(loadClusterConfig({ path: file })).toMatchObject({ kind: "Refused", line: 4 });
  });

  test("a file too large to be a configuration is not read", () => {
    const file = join(tempDir(), "big.toml");
    writeFileSync(file, `# ${"x".repeat(MAX_CLUSTER_CONFIG_BYTES)}\n`);
    expect(loadClusterConfig({ path: file }).kind).toBe("Unreadable");
  });
});

// ---------------------------------------------------------------------------------------------
// Preflight
// ---------------------------------------------------------------------------------------------

describe("preflight", () => {
  const config = loaded(
    parseClusterConfig(
      `${MINIMAL}partition = "gpu"\ngpus = 2\n[profiles.q]\ndescription = "d"\nallow_batch = true\n`,
    ),
  );

  test("tests the broker's argv with --test-only instead of --parsable and no script", () => {
    const argv = preflightArgv(config.profiles[0] as (typeof config.profiles)[number]);
    if (argv.kind !== "Valid") throw new Error(argv.message);
    expect(argv.argv).toContain("--test-only");
    expect(argv.argv).not.toContain("--parsable");
    expect(argv.argv.at(-1)).toBe("--wrap=true");
    expect(argv.argv).toContain("--partition=gpu");
    expect(argv.argv).toContain("--gres=gpu:2");
    expect(argv.argv.filter((a) => !a.startsWith("--"))).toEqual([]);
  });

  test("one call per profile, judged by exit and wording", async () => {
    const calls: (readonly string[])[] = [];
    const answers: SbatchTestAnswer[] = [
      {
        kind: "Exited",
        exitCode: 1,
        stdout: "",
        stderr:
          "sbatch: error: invalid partition specified: gpu\nallocation failure: Invalid partition name specified\n",
      },
      { kind: "Exited", exitCode: 0, stdout: "", stderr: "sbatch: Job 5 to start at now\n" },
    ];
    const verdicts = await preflightProfiles(config.profiles, async (args) => {
      calls.push(args);
      return answers[calls.length - 1] as SbatchTestAnswer;
    });
    expect(calls).toHaveLength(2);
    expect(verdicts).toEqual([
      {
        profile: "p",
        outcome: "IMPOSSIBLE",
        detail:
          "sbatch: error: invalid partition specified: gpu / allocation failure: Invalid partition name specified",
      },
      { profile: "q", outcome: "POSSIBLE", detail: "sbatch: Job 5 to start at now" },
    ]);
  });

  test("no answer is never 'impossible'", () => {
    expect(
      judgePreflight("p", { kind: "NoAnswer", message: "sbatch: no such command" }).outcome,
    ).toBe("UNANSWERED");
    expect(
      judgePreflight("p", {
        kind: "Exited",
        exitCode: 1,
        stdout: "",
        stderr:
          "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
      }).outcome,
    ).toBe("UNANSWERED");
  });

  test("a missing sbatch is no answer", async () => {
    const run = createSbatchTestRun({ path: tempDir() });
    expect((await run(["--test-only", "--wrap=true"])).kind).toBe("NoAnswer");
  });

  const clusterDir = process.env["OPENAI4S_SLURM_TEST_DIR"];
  test.skipIf(clusterDir === undefined)(
    "against the real test cluster: possible and impossible profiles are told apart",
    async () => {
      const dir = clusterDir as string;
      const slurmConf = /export SLURM_CONF=(\S+)/.exec(readFileSync(join(dir, "env"), "utf8"))?.[1];
      if (slurmConf === undefined) throw new Error(`no SLURM_CONF in ${dir}/env`);
      const real = loaded(
        parseClusterConfig(
          [
            '[profiles.two-nodes]\ndescription = "d"\nallow_batch = true\npartition = "debug"\nnodes = 2\ncpus = 1\ntime_limit_minutes = 5',
            '[profiles.no-such-partition]\ndescription = "d"\nallow_batch = true\npartition = "o4s-nope"',
            '[profiles.too-many-nodes]\ndescription = "d"\nallow_batch = true\nnodes = 3',
            '[profiles.too-many-gpus]\ndescription = "d"\nallow_batch = true\ngpus = 64',
            "",
          ].join("\n"),
        ),
      );
      const run = createSbatchTestRun({
        path: "/usr/local/bin:/usr/bin:/bin:/usr/sbin",
        slurmConf,
      });
      const expected = [
        ["two-nodes", "POSSIBLE"],
        ["no-such-partition", "IMPOSSIBLE"],
        ["too-many-nodes", "IMPOSSIBLE"],
        ["too-many-gpus", "IMPOSSIBLE"],
      ];
      // The cluster is shared: another suite may be restarting its controller right now, and
      // a controller that is coming back answers "not available" for a while. Poll.
      let seen: string[][] = [];
      const asExpected = async () => {
        const verdicts = await preflightProfiles(real.profiles, run);
        seen = verdicts.map((v) => [v.profile, v.outcome]);
        return JSON.stringify(seen) === JSON.stringify(expected);
      };
      // The assertion below on the last verdicts says more than a timeout would.
      await eventually(asExpected, { timeoutMs: 60_000, intervalMs: 1_000 }).catch(() => {});
      expect(seen).toEqual(expected);
    },
    90_000,
  );
});
