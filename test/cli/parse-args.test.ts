/**
 * The CLI's own strict argument parser (src/lib/command/parse-args.ts, written to spare
 * every command the cost of evaluating `node:util`) against the implementation it replaced:
 * `node:util` parseArgs behind the same dash-value joining and the same reworded messages.
 * Every case must give the same values and positionals, or the same message.
 */
import { describe, expect, test } from "bun:test";
import { type ParseArgsConfig, parseArgs } from "node:util";
import { UsageError } from "../../src/lib/command/command.ts";
import { parseStrict } from "../../src/lib/command/parse-args.ts";
import { closest } from "../../src/lib/command/suggest.ts";

type Options = NonNullable<ParseArgsConfig["options"]>;

// --- the replaced implementation, verbatim but for names: the oracle ------------------------

function isOptionOf(arg: string, options: Options): boolean {
  if (arg.startsWith("--")) return Object.hasOwn(options, arg.slice(2).split("=")[0] ?? "");
  if (arg.length === 2 && arg.startsWith("-")) {
    return Object.values(options).some((o) => o.short === arg.slice(1));
  }
  return false;
}

function joinDashValues(args: readonly string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--") {
      out.push(...args.slice(i));
      break;
    }
    const next = args[i + 1];
    const name = arg.startsWith("--") && !arg.includes("=") ? arg.slice(2) : null;
    if (
      name !== null &&
      Object.hasOwn(options, name) &&
      options[name]?.type === "string" &&
      next?.startsWith("-") &&
      next !== "--" &&
      !isOptionOf(next, options)
    ) {
      out.push(`${arg}=${next}`);
      i += 1;
      continue;
    }
    out.push(arg);
  }
  return out;
}

function describeParseError(error: unknown, options: Options): string {
  const message = error instanceof Error ? error.message : String(error);
  const unknown = /^Unknown option '([^']*)'/.exec(message);
  // Our parser adds "did you mean" for a long option close to a known one (suggest.test.ts
  // holds the matching itself); node has no such thing.
  const match =
    unknown?.[1]?.startsWith("--") === true
      ? closest(
          unknown[1],
          Object.keys(options).map((name) => `--${name}`),
        )
      : null;
  if (unknown && match !== null) return `unknown option "${unknown[1]}" (did you mean "${match}"?)`;
  if (unknown) {
    return `unknown option "${unknown[1]}" (an argument that starts with - goes after --, as in -- "${unknown[1]}")`;
  }
  const missing = /^Option '(-[^ ']*)(?: <value>)?' argument missing/.exec(message);
  if (missing) return `${missing[1]} needs a value`;
  const ambiguous = /^Option '([^']*)' argument is ambiguous/.exec(message);
  if (ambiguous) {
    return `${ambiguous[1]} needs a value (write ${ambiguous[1]}=VALUE for a value that starts with -)`;
  }
  const noValue = /^Option '([^']*)' does not take an argument/.exec(message);
  if (noValue) return `${noValue[1]} takes no value`;
  return message;
}

function oracle(args: readonly string[], options: Options): unknown {
  try {
    const parsed = parseArgs({
      args: joinDashValues(args, options),
      options,
      strict: true,
      allowPositionals: true,
    });
    return { values: { ...parsed.values }, positionals: parsed.positionals };
  } catch (error) {
    return { error: `cmd: ${describeParseError(error, options)}` };
  }
}

function ours(args: readonly string[], options: Options): unknown {
  try {
    const parsed = parseStrict("cmd", args, options);
    return { values: { ...parsed.values }, positionals: parsed.positionals };
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    return { error: error.message };
  }
}

// --- the cases --------------------------------------------------------------------------

/** The shapes the commands use: string and boolean flags, shorts, a multiple string. */
const OPTIONS: Options = {
  help: { type: "boolean", short: "h" },
  json: { type: "boolean" },
  follow: { type: "boolean", short: "f" },
  server: { type: "string" },
  "time-limit": { type: "string" },
  env: { type: "string", multiple: true },
  profile: { type: "string", short: "p" },
};

const CASES: readonly (readonly string[])[] = [
  [],
  ["a", "b"],
  ["--help"],
  ["-h"],
  ["-hf"],
  ["-fh", "x"],
  ["--json", "id"],
  ["--server", "unix:/s", "x"],
  ["--server=unix:/s"],
  ["--server="],
  ["--server"],
  ["--server", "--json"],
  ["--time-limit", "-5m"],
  ["--time-limit=-5m"],
  ["--time-limit", "-h"],
  ["--time-limit", "--"],
  ["--env", "A=1", "--env", "B=2", "--env=C=3"],
  ["--env", "A=1"],
  ["--server", "a", "--server", "b"],
  ["--json=yes"],
  ["--help=1"],
  ["--nope"],
  ["--nope=1"],
  ["-x"],
  ["-hx"],
  ["-xh"],
  ["-5"],
  ["-"],
  ["--", "--json", "-h"],
  ["a", "--", "b"],
  ["--", "--"],
  ["-p", "gpu"],
  ["-pgpu"],
  ["-p"],
  ["-p", "-x"],
  ["-hp", "gpu"],
  ["--profile", "gpu", "cell code", "--json"],
  ["x", "--json", "y"],
  ["--no-json"],
  ["---json"],
  ["--constructor"],
  ["--__proto__"],
  ["--toString"],
];

describe("parseStrict gives what node:util parseArgs gave", () => {
  test.each(CASES.map((c) => [c.join(" ") || "(none)", c]))("%s", (_label, args) => {
    expect(ours(args as string[], OPTIONS)).toEqual(oracle(args as string[], OPTIONS));
  });

  test("with no options at all", () => {
    for (const args of [[], ["a"], ["-a"], ["--a"], ["--", "-a"]]) {
      expect(ours(args, {})).toEqual(oracle(args, {}));
    }
  });
});
