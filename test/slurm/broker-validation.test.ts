/**
 * Properties of the broker's validation: no accepted job name, comment, scheduler name, path or
 * environment value can alter the meaning of the argv handed to the scheduler.
 *
 * "Meaning" is checked against models of how the tools read their arguments:
 * - the option list: every element before the script is `--option=value` (or a bare flag we
 *   put there), each option at most once, and the values read back are exactly the inputs;
 * - `--export`: sbatch splits the list on commas OUTSIDE quotes (measured on 22.05:
 *   `X=it's,Y=b,Z=it's` sets only X), reads a bare ALL/NONE/NIL as a keyword, and a bare name
 *   as "propagate the submitter's value". An accepted environment must read back as exactly
 *   its own entries, with no keyword and no bare name.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  type BatchSpec,
  type StepSpec,
  sacctArgv,
  sbatchArgv,
  squeueArgv,
  srunArgv,
} from "../../src/adapters/backend-slurm/broker-argv.ts";
import {
  EXPORT_OPTION,
  jobEnvironment,
  validateEnv,
  validateEnvName,
} from "../../src/adapters/backend-slurm/broker-validation.ts";

const NASTY = [
  "a",
  "Z",
  "0",
  "9",
  "_",
  "-",
  ".",
  ",",
  "'",
  '"',
  "\n",
  "\r",
  "\0",
  "=",
  "|",
  "%",
  "\\",
  " ",
  "\t",
  "$",
  ";",
  ":",
  "/",
  "ALL",
  "none",
  "Nil",
  "TOKEN",
  "key",
  "SLURM_",
  "é",
  "#SBATCH ",
];
const nasty = fc.array(fc.constantFrom(...NASTY), { maxLength: 8 }).map((parts) => parts.join(""));
const label = fc.oneof(nasty, fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,20}$/));
const path = fc.oneof(
  nasty.map((s) => `/${s}`),
  fc.stringMatching(/^(\/[A-Za-z0-9._-]{1,8}){1,4}$/),
);
const envName = fc.oneof(nasty, fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,10}$/));
const envValue = fc.oneof(nasty, fc.string({ maxLength: 12 }));
const env = fc.dictionary(envName, envValue, { maxKeys: 6 });

type ExportToken =
  | { readonly kind: "keyword"; readonly word: string }
  | { readonly kind: "bare"; readonly name: string }
  | { readonly kind: "set"; readonly name: string; readonly value: string };

/** sbatch's reading of `--export=...`, as measured. */
function readExport(list: string): ExportToken[] {
  const tokens: string[] = [];
  let current = "";
  let quote: string | null = null;
  for (const ch of list) {
    if (quote !== null) {
      if (ch === quote) quote = null;
      current += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      current += ch;
    } else if (ch === ",") {
      tokens.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  tokens.push(current);
  return tokens.map((t) => {
    if (["ALL", "NONE", "NIL"].includes(t.trim().toUpperCase()))
      return { kind: "keyword", word: t };
    const eq = t.indexOf("=");
    if (eq < 0) return { kind: "bare", name: t };
    return { kind: "set", name: t.slice(0, eq), value: t.slice(eq + 1) };
  });
}

/** The option list as a getopt_long reader sees it: `--name=value` up to the first operand. */
function readOptions(argv: readonly string[]): {
  options: Map<string, string[]>;
  operands: string[];
} {
  const options = new Map<string, string[]>();
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "--") {
      i++;
      break;
    }
    if (!arg.startsWith("--")) break;
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    const value = eq < 0 ? "" : arg.slice(eq + 1);
    options.set(name, [...(options.get(name) ?? []), value]);
  }
  return { options, operands: argv.slice(i) };
}

const spec = fc.record({
  jobName: label,
  comment: label,
  scriptPath: path,
  workDir: path,
  stdoutPath: path,
  stderrPath: path,
  partition: fc.option(label, { nil: null }),
  qos: fc.option(label, { nil: null }),
  account: fc.option(label, { nil: null }),
  nodes: fc.integer({ min: -1, max: 64 }),
  cpusPerTask: fc.integer({ min: 0, max: 64 }),
  gpusPerNode: fc.integer({ min: -1, max: 8 }),
  memoryMb: fc.option(fc.integer({ min: -1, max: 1 << 20 }), { nil: null }),
  timeLimitMinutes: fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: null }),
  env,
}) satisfies fc.Arbitrary<BatchSpec>;

describe("broker validation (properties)", () => {
  test("an accepted environment, written as a --export list, reads back as exactly its entries", () => {
    // sbatch gets --export=ALL (the environment travels as its process environment), but the
    // values stay list-safe: a site's wrapper may well turn them back into a list.
    fc.assert(
      fc.property(env, (e) => {
        if (validateEnv(e).kind !== "Valid") return;
        const entries = Object.entries(e);
        if (entries.length === 0) return;
        entries.sort(([a], [b]) => (a < b ? -1 : 1));
        const list = entries.map(([k, v]) => `${k}=${v}`).join(",");
        const tokens = readExport(list);
        expect(tokens).toEqual(
          entries
            .map(([name, value]) => ({ kind: "set" as const, name, value }))
            .sort((a, b) => (a.name < b.name ? -1 : 1)),
        );
      }),
      { numRuns: 2000 },
    );
  });

  test("commas, quotes, newlines, NUL and ALL/NONE/NIL values are refused", () => {
    fc.assert(
      fc.property(envName, envValue, (name, value) => {
        const dangerous =
          /[,'"\n\0]/.test(value) || ["ALL", "NONE", "NIL"].includes(value.trim().toUpperCase());
        if (dangerous) expect(validateEnv({ [name]: value }).kind).toBe("Invalid");
      }),
      { numRuns: 2000 },
    );
  });

  test("credential-shaped names are refused whatever their case and surroundings", () => {
    const word = fc.constantFrom(
      "TOKEN",
      "SECRET",
      "PASSWORD",
      "KEY",
      "CREDENTIAL",
      "PASSWD",
      "AUTH",
    );
    const anyCase = word.chain((w) =>
      fc
        .array(fc.boolean(), { minLength: w.length, maxLength: w.length })
        .map((flags) => [...w].map((c, i) => (flags[i] ? c.toLowerCase() : c)).join("")),
    );
    const affix = fc.stringMatching(/^[A-Z_]{0,6}$/);
    fc.assert(
      fc.property(affix, anyCase, affix, (pre, w, post) => {
        const name = `${pre}${w}${post}`.replace(/^[0-9]/, "_");
        expect(validateEnvName(name).kind).toBe("Invalid");
      }),
    );
    for (const name of [
      "HF_TOKEN",
      "AWS_SECRET_ACCESS_KEY",
      "db_password",
      "OPENAI_API_KEY",
      "Credential",
    ]) {
      expect(validateEnvName(name).kind).toBe("Invalid");
    }
    for (const name of ["OMP_NUM_THREADS", "PATH", "MODE", "HOME"]) {
      expect(validateEnvName(name).kind).toBe("Valid");
    }
  });

  test("an accepted sbatch request reads back as exactly the request", () => {
    fc.assert(
      fc.property(spec, (s) => {
        const result = sbatchArgv(s);
        if (result.kind !== "Valid") return;
        const { options, operands } = readOptions(result.argv);
        // Exactly one operand, the script; every option at most once.
        expect(operands).toEqual([s.scriptPath]);
        for (const [name, values] of options) expect([name, values.length]).toEqual([name, 1]);
        const one = (name: string) => options.get(name)?.[0] ?? null;
        expect(one("job-name")).toBe(s.jobName);
        expect(one("comment")).toBe(s.comment);
        expect(one("chdir")).toBe(s.workDir);
        expect(one("output")).toBe(s.stdoutPath);
        expect(one("error")).toBe(s.stderrPath);
        expect(one("partition")).toBe(s.partition);
        expect(one("qos")).toBe(s.qos);
        expect(one("account")).toBe(s.account);
        expect(one("nodes")).toBe(String(s.nodes));
        // Names the scheduler reads as lists or patterns carry no separator or pattern.
        for (const v of [s.jobName, s.comment, s.partition, s.qos, s.account]) {
          if (v !== null) expect(v).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*$/);
        }
        for (const p of [s.stdoutPath, s.stderrPath]) expect(p).not.toMatch(/[%\\\n]/);
        // Only the bare word ALL keeps sbatch from running the account's login shell.
        expect(options.get("export")).toEqual(["ALL"]);
        expect(result.argv).toContain(EXPORT_OPTION);
        for (const arg of result.argv) expect(arg.includes("\n") || arg.includes("\0")).toBe(false);
      }),
      { numRuns: 3000 },
    );
  });

  test("the job's process environment is exactly its env and the scheduler's config", () => {
    fc.assert(
      fc.property(env, fc.option(path, { nil: undefined }), (e, conf) => {
        const out = jobEnvironment(e, conf);
        const expected: Record<string, string> = { ...e };
        if (conf !== undefined) expected["SLURM_CONF"] = conf;
        expect(out).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });

  test("labels outside the character class are refused", () => {
    fc.assert(
      fc.property(label, (l) => {
        const ok = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(l);
        const s: BatchSpec = {
          jobName: "o4s-x",
          comment: l,
          scriptPath: "/s",
          workDir: "/w",
          stdoutPath: "/o",
          stderrPath: "/e",
          partition: l,
          qos: null,
          account: null,
          nodes: 1,
          cpusPerTask: 1,
          gpusPerNode: 0,
          memoryMb: null,
          timeLimitMinutes: null,
          env: {},
        };
        expect(sbatchArgv(s).kind).toBe(ok ? "Valid" : "Invalid");
      }),
      { numRuns: 2000 },
    );
  });

  test("a step's command is exactly the operands after --, whatever it contains", () => {
    const step = fc.record({
      jobId: fc.oneof(
        fc.constantFrom("1", "123", "0", "12a", ""),
        fc.stringMatching(/^[1-9][0-9]{0,6}$/),
      ),
      command: fc.array(fc.oneof(nasty, fc.constantFrom("--", "--overlap", "-N9", "--jobid=1")), {
        maxLength: 5,
      }),
      env,
      workDir: fc.option(path, { nil: null }),
      timeoutMs: fc.constant(1000),
      maxOutputBytes: fc.constant(1000),
      timeLimitMinutes: fc.integer({ min: 0, max: 5 }),
    }) satisfies fc.Arbitrary<StepSpec>;
    fc.assert(
      fc.property(step, (s) => {
        const result = srunArgv(s);
        if (result.kind !== "Valid") return;
        const { options, operands } = readOptions(result.argv);
        expect(operands).toEqual([...s.command]);
        expect(options.get("jobid")).toEqual([s.jobId]);
        expect(options.get("export")).toEqual(["ALL"]);
      }),
      { numRuns: 2000 },
    );
  });

  test("listing queries read back as exactly the names or ids asked for", () => {
    fc.assert(
      fc.property(fc.array(label, { minLength: 1, maxLength: 5 }), (names) => {
        const q = squeueArgv({ uid: 1000, names });
        const a = sacctArgv({ kind: "ByNames", names, lookbackSeconds: 3600 });
        expect(a.kind).toBe(q.kind);
        if (q.kind !== "Valid" || a.kind !== "Valid") return;
        const { options, operands } = readOptions(a.argv);
        expect(operands).toEqual([]);
        expect(options.get("name")?.[0]?.split(",")).toEqual(names);
        // squeue lists the account's jobs; the names choose rows (parse.ts), not the argv.
        const queue = readOptions(q.argv);
        expect(queue.operands).toEqual([]);
        expect(queue.options.get("user")).toEqual(["1000"]);
        expect(queue.options.has("name")).toBe(false);
      }),
    );
    expect(sacctArgv({ kind: "ByJobIds", jobIds: ["1", "2,3"] }).kind).toBe("Invalid");
    expect(squeueArgv({ uid: 1000, names: [] }).kind).toBe("Invalid");
    expect(squeueArgv({ uid: 1000, names: ["a,b"] }).kind).toBe("Invalid");
    expect(squeueArgv({ uid: -1, names: ["a"] }).kind).toBe("Invalid");
  });
});
