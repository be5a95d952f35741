/**
 * Memory on the command line, in MB, as a batch scheduler's `--mem` reads it: a bare number
 * is megabytes (300), a suffix K, M, G or T (case-insensitive, an optional B after it) scales
 * by 1024. Anything else is refused rather than guessed: `1.5G` or `300 MiB` read three ways
 * by three people, and memory read the wrong way kills a job or holds a node.
 */
import { UsageError } from "../../lib/command/command.ts";

const MEMORY = /^([0-9]{1,12})([KMGT]B?)?$/i;
const KB_PER_UNIT: Readonly<Record<string, number>> = { K: 1, M: 1024, G: 1024 ** 2, T: 1024 ** 3 };

/** The forms a memory flag accepts, for its help and its error. */
export const MEMORY_FORMS = "MB when bare (300), or 300M, 2G, 1T, 512000K";

/** Whole megabytes, or null when `text` is not a positive amount in one of the forms above. */
export function parseMemoryMb(text: string): number | null {
  const match = MEMORY.exec(text);
  if (match === null) return null;
  const unit = (match[2] ?? "M").charAt(0).toUpperCase();
  const kb = Number(match[1]) * (KB_PER_UNIT[unit] ?? 0);
  // Kilobytes that are no whole number of megabytes: no limit is set in less than a MB.
  if (kb % 1024 !== 0) return null;
  const mb = kb / 1024;
  return Number.isSafeInteger(mb) && mb > 0 ? mb : null;
}

/** A memory flag's value in MB, or undefined when not given; a usage error naming the flag. */
export function parseMemoryFlag(
  command: string,
  flag: string,
  text: string | undefined,
): number | undefined {
  if (text === undefined) return undefined;
  const mb = parseMemoryMb(text);
  if (mb === null) {
    throw new UsageError(
      `${command}: ${flag} "${text}" is not an amount of memory (${MEMORY_FORMS})`,
    );
  }
  return mb;
}
