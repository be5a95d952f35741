/**
 * Strict argument parsing for every subcommand, with the runtime's messages replaced by
 * ones that name the flag and say what to write instead.
 *
 * `node:util` parseArgs refuses `--time-limit -5m` as "ambiguous" (the value starts with a
 * dash) while `--time-limit=-5m` reaches the command's own check; a user gets two different
 * errors for one mistake. A value that starts with a dash and is not itself one of the
 * command's options is therefore joined to its string flag before parsing, so both forms
 * get the command's own message ("not a duration ...").
 */
import { type ParseArgsConfig, parseArgs } from "node:util";
import { UsageError } from "./command.ts";

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

/** parseArgs's message, reworded: the flag in double quotes, balanced, and what to do. */
function describeParseError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const unknown = /^Unknown option '([^']*)'/.exec(message);
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

/** Strict parse; every failure is a UsageError `COMMAND: message`. */
export function parseStrict<const O extends Options>(
  command: string,
  args: readonly string[],
  options: O,
) {
  try {
    return parseArgs({
      args: joinDashValues(args, options),
      options,
      strict: true,
      allowPositionals: true,
    });
  } catch (error) {
    throw new UsageError(`${command}: ${describeParseError(error)}`);
  }
}
