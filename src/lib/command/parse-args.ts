/**
 * Strict argument parsing for every subcommand, with messages that name the flag and say
 * what to write instead.
 *
 * Written here rather than taken from `node:util`: evaluating that module costs about 1 ms
 * of CPU in the compiled binary, a sixth of what `openai4s list` costs to start in all
 * (bench/startup.bench.ts), and every command parses its arguments. It follows `parseArgs`
 * with `strict: true, allowPositionals: true`: long options (`--name`, `--name=value`),
 * short ones and their groups (`-h`, `-hf`, `-pVALUE`), `multiple`, the last value winning
 * otherwise, and everything after a bare `--` a positional. test/cli/parse-args.test.ts
 * holds it to node's results, case by case.
 *
 * `node:util` parseArgs refuses `--time-limit -5m` as "ambiguous" (the value starts with a
 * dash) while `--time-limit=-5m` reaches the command's own check; a user gets two different
 * errors for one mistake. A value that starts with a dash and is not itself one of the
 * command's options is therefore joined to its string flag before parsing, so both forms
 * get the command's own message ("not a duration ...").
 */
import type { ParseArgsConfig, parseArgs } from "node:util";
import { UsageError } from "./command.ts";
import { closest } from "./suggest.ts";

type Options = NonNullable<ParseArgsConfig["options"]>;

function isOptionOf(arg: string, options: Options): boolean {
  if (arg.startsWith("--")) return Object.hasOwn(options, arg.slice(2).split("=")[0] ?? "");
  if (arg.length === 2 && arg.startsWith("-")) {
    return Object.values(options).some((o) => o.short === arg.slice(1));
  }
  return false;
}

/** `--flag -value` → `--flag=-value` for string flags, up to a bare `--`. */
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

type Parsed<O extends Options> = ReturnType<
  typeof parseArgs<{
    readonly args: string[];
    readonly options: O;
    readonly strict: true;
    readonly allowPositionals: true;
  }>
>;

interface Found {
  readonly name: string;
  readonly type: "string" | "boolean";
  /** How node's messages name it: `--name`, or `-n, --name` when it has a short form. */
  readonly label: string;
}

/** The option a name or short letter stands for. */
function lookup(options: Options, arg: string): Found | null {
  const found = (name: string, option: Options[string]): Found => ({
    name,
    type: option.type,
    label: option.short === undefined ? `--${name}` : `-${option.short}, --${name}`,
  });
  if (arg.startsWith("--")) {
    const name = arg.slice(2);
    const option = Object.hasOwn(options, name) ? options[name] : undefined;
    return option === undefined ? null : found(name, option);
  }
  const letter = arg.slice(1);
  for (const [name, option] of Object.entries(options)) {
    if (option.short === letter) return found(name, option);
  }
  return null;
}
/** A long option's close match gets "did you mean"; anything else the `--` advice. */
function unknownOption(arg: string, options: Options): string {
  const match = arg.startsWith("--")
    ? closest(
        arg,
        Object.keys(options).map((name) => `--${name}`),
      )
    : null;
  if (match !== null) return `unknown option "${arg}" (did you mean "${match}"?)`;
  return `unknown option "${arg}" (an argument that starts with - goes after --, as in -- "${arg}")`;
}

/**
 * `parseArgs` in strict mode with positionals allowed (see the header); throws the message
 * for the first bad argument.
 */
function parseStrictly(args: readonly string[], options: Options) {
  const values: Record<string, string | boolean | (string | boolean)[]> = {};
  const positionals: string[] = [];
  const store = (name: string, value: string | boolean) => {
    if (options[name]?.multiple) {
      const list = values[name];
      values[name] = Array.isArray(list) ? [...list, value] : [value];
    } else {
      values[name] = value;
    }
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const flag = eq === -1 ? arg : arg.slice(0, eq);
      const option = lookup(options, flag);
      if (option === null) throw new Error(unknownOption(flag, options));
      if (eq !== -1) {
        if (option.type === "boolean") throw new Error(`${option.label} takes no value`);
        store(option.name, arg.slice(eq + 1));
      } else if (option.type === "boolean") {
        store(option.name, true);
      } else {
        i += 1;
        store(option.name, valueAfter(option, flag, args[i]));
      }
      continue;
    }
    if (arg.startsWith("-") && arg.length > 1) {
      i += shortOptions(arg, args[i + 1], options, store);
      continue;
    }
    positionals.push(arg);
  }
  return { values, positionals };
}

/**
 * The value after a string option: present, and not something that looks like an option.
 * (An option with a short form keeps node's own wording when missing, as it always did.)
 */
function valueAfter(option: Found, typed: string, next: string | undefined): string {
  const { label } = option;
  if (next === undefined) {
    throw new Error(
      label.includes(" ") ? `Option '${label} <value>' argument missing` : `${label} needs a value`,
    );
  }
  if (next.startsWith("-")) {
    throw new Error(`${typed} needs a value (write ${typed}=VALUE for a value that starts with -)`);
  }
  return next;
}

/**
 * `-h`, a group `-hf` of booleans, or a string option's value inline (`-pVALUE`) or next.
 * Returns how many following arguments were consumed.
 */
function shortOptions(
  arg: string,
  next: string | undefined,
  options: Options,
  store: (name: string, value: string | boolean) => void,
): number {
  for (let j = 1; j < arg.length; j++) {
    const flag = `-${arg[j]}`;
    const option = lookup(options, flag);
    // In a group node names the letter alone: "-hx" has an unknown option "x".
    if (option === null) {
      throw new Error(unknownOption(arg.length === 2 ? flag : (arg[j] ?? ""), options));
    }
    if (option.type === "boolean") {
      store(option.name, true);
      continue;
    }
    if (j + 1 < arg.length) {
      store(option.name, arg.slice(j + 1));
      return 0;
    }
    store(option.name, valueAfter(option, flag, next));
    return 1;
  }
  return 0;
}

/** Strict parse; every failure is a UsageError `COMMAND: message`. */
export function parseStrict<const O extends Options>(
  command: string,
  args: readonly string[],
  options: O,
): Parsed<O> {
  try {
    return parseStrictly(joinDashValues(args, options), options) as Parsed<O>;
  } catch (error) {
    throw new UsageError(`${command}: ${(error as Error).message}`);
  }
}
