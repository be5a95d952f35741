/**
 * Durations on the command line, in seconds: `90` and `90s`, `15m`, `2h`, `1h30m`,
 * `1h30m15s`, and `HH:MM:SS` (minutes and seconds below 60). Anything else is refused rather
 * than guessed: `1.5h` or `90sec` read three ways by three people, and a time limit read the
 * wrong way kills a week-long job or holds a GPU for a month.
 */

import { UsageError } from "../../lib/command/command.ts";

const UNITS = /^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$/;
const CLOCK = /^([0-9]+):([0-5][0-9]):([0-5][0-9])$/;

/** Seconds, or null when `text` is not a positive duration in one of the forms above. */
export function parseDuration(text: string): number | null {
  let seconds: number;
  if (/^[0-9]+$/.test(text)) {
    seconds = Number(text);
  } else if (CLOCK.test(text)) {
    const [, h, m, s] = CLOCK.exec(text) as RegExpExecArray;
    seconds = Number(h) * 3600 + Number(m) * 60 + Number(s);
  } else {
    const match = UNITS.exec(text);
    if (!match || text === "") return null;
    const [, h, m, s] = match;
    seconds = Number(h ?? 0) * 3600 + Number(m ?? 0) * 60 + Number(s ?? 0);
  }
  if (!Number.isSafeInteger(seconds) || seconds <= 0) return null;
  return seconds;
}

/**
 * A duration flag's value in seconds, or undefined when the flag was not given. A value that
 * is not a duration is a usage error naming the command and the flag.
 */
export function parseDurationFlag(
  command: string,
  flag: string,
  text: string | undefined,
): number | undefined {
  if (text === undefined) return undefined;
  const seconds = parseDuration(text);
  if (seconds === null) {
    throw new UsageError(
      `${command}: ${flag} "${text}" is not a duration (90, 90s, 15m, 2h, 1h30m, HH:MM:SS)`,
    );
  }
  return seconds;
}

/** `1h30m`, `45s`: the inverse, for messages. */
export function formatDuration(totalSeconds: number): string {
  const h = Math.floor(totalSeconds / 3600);
  const m = Math.floor((totalSeconds % 3600) / 60);
  const s = totalSeconds % 60;
  const parts = [h > 0 ? `${h}h` : "", m > 0 ? `${m}m` : "", s > 0 ? `${s}s` : ""];
  return parts.join("") || "0s";
}
