/**
 * `--cpus N --mem SIZE --gpus N`, shared by `submit` and `session start`: the request's
 * `resources`, or nothing when none was given. Only the form is checked here; the bounds are
 * the profile's maxima, which the daemon checks (and names in its refusal).
 */
import { MEMORY_FORMS, parseMemoryFlag } from "./memory.ts";
import { parseIntegerFlag } from "./numbers.ts";

export const RESOURCE_OPTIONS = {
  cpus: { type: "string" },
  mem: { type: "string" },
  gpus: { type: "string" },
} as const;

/** The options' lines in a command's help, aligned at `column`. */
export function resourceFlagsHelp(column: number, tasks: boolean): string {
  const pad = (flag: string) => `  ${flag.padEnd(column - 2)}`;
  const more = " ".repeat(column);
  return [
    `${pad("--cpus N")}CPUs per node${tasks ? " (per task with --tasks)" : ""} in place of the`,
    `${more}profile's default, at most its maximum (\`openai4s profiles\`).`,
    `${pad("--mem SIZE")}Memory per node in place of the profile's default, at most`,
    `${more}its maximum, as a batch scheduler's --mem reads it:`,
    `${more}${MEMORY_FORMS}.`,
    `${pad("--gpus N")}GPUs per node in place of the profile's default, at most`,
    `${more}its maximum.`,
  ].join("\n");
}

export function parseResourceFlags(
  command: string,
  values: { readonly cpus?: string; readonly mem?: string; readonly gpus?: string },
): Readonly<Record<string, number>> | undefined {
  const asked = Object.entries({
    cpus: parseIntegerFlag(command, "--cpus", values.cpus, { min: 1, max: 1_000_000 }),
    memoryMb: parseMemoryFlag(command, "--mem", values.mem),
    gpus: parseIntegerFlag(command, "--gpus", values.gpus, { min: 0, max: 1_000 }),
  }).filter((entry): entry is [string, number] => entry[1] !== undefined);
  return asked.length === 0 ? undefined : Object.fromEntries(asked);
}
