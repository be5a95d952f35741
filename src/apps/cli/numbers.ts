/**
 * Whole-number flags (`--tail 20`, `--max-attempts 3`): decimal digits only, within bounds,
 * and a refusal that names the flag and what it accepts. `1e3`, `0x10` and `2.0` are
 * refused rather than read: a number a person typed must mean one thing.
 */
import { UsageError } from "../../lib/command/command.ts";

export function parseIntegerFlag(
  command: string,
  flag: string,
  text: string | undefined,
  bounds: { readonly min: number; readonly max: number },
): number | undefined {
  if (text === undefined) return undefined;
  const value = /^[0-9]{1,15}$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= bounds.min && value <= bounds.max)) {
    throw new UsageError(
      `${command}: ${flag} "${text}" is not a whole number from ${bounds.min} to ${bounds.max}`,
    );
  }
  return value;
}
