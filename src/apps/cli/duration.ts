/**
 * Durations on the command line, in seconds, in two families:
 *
 * - units: `90s`, `15m`, `2h`, `3d`, `1h30m`, `1d12h`, `1h30m15s`;
 * - the batch scheduler's own forms, as its `--time` reads them: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`,
 *   `D-HH:MM`, `D-HH:MM:SS` (a field after the first below 60, hours after a day below 24).
 *
 * A bare number is where the two families disagree: the scheduler reads `--time=90` as ninety
 * minutes, `timeout 90` reads it as ninety seconds. Each flag says which it means (`bare`):
 * `--time-limit` is the scheduler's time limit and follows the scheduler, so a cluster user's habit
 * never gives a job a sixtieth of the time it was meant to have; waits and timeouts follow
 * `timeout(1)`. Anything else is refused rather than guessed: `1.5h` or `90sec` read three
 * ways by three people, and a time limit read the wrong way kills a week-long job or holds a
 * GPU for a month.
 */

import { UsageError } from "../../lib/command/command.ts";

/** What a bare number counts. */
export type BareUnit = "seconds" | "minutes";

const UNITS = /^(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$/;
/** `MM:SS` and `HH:MM:SS`: the first field unbounded, the others below 60. */
const CLOCK = /^([0-9]+)(?::([0-5][0-9]))?:([0-5][0-9])$/;
/** `D-HH`, `D-HH:MM`, `D-HH:MM:SS`. */
const DAYS = /^([0-9]+)-([01]?[0-9]|2[0-3])(?::([0-5][0-9]))?(?::([0-5][0-9]))?$/;

const n = (text: string | undefined): number => Number(text ?? 0);

function clockSeconds(text: string): number | null {
  const match = CLOCK.exec(text);
  if (match === null) return null;
  const [, first, middle, last] = match;
  // Two fields are MM:SS, three are HH:MM:SS, as the scheduler reads them.
  return middle === undefined
    ? n(first) * 60 + n(last)
    : n(first) * 3600 + n(middle) * 60 + n(last);
}

function daySeconds(text: string): number | null {
  const match = DAYS.exec(text);
  if (match === null) return null;
  const [, d, h, m, s] = match;
  return n(d) * 86400 + n(h) * 3600 + n(m) * 60 + n(s);
}

function unitSeconds(text: string): number | null {
  const match = UNITS.exec(text);
  if (match === null || text === "") return null;
  const [, d, h, m, s] = match;
  return n(d) * 86400 + n(h) * 3600 + n(m) * 60 + n(s);
}

/**
 * Seconds, or null when `text` is not a positive duration in one of the forms above. A bare
 * number counts `bare` (seconds unless said otherwise).
 */
export function parseDuration(text: string, bare: BareUnit = "seconds"): number | null {
  const seconds = /^[0-9]+$/.test(text)
    ? Number(text) * (bare === "minutes" ? 60 : 1)
    : (clockSeconds(text) ?? daySeconds(text) ?? unitSeconds(text));
  if (seconds === null || !Number.isSafeInteger(seconds) || seconds <= 0) return null;
  return seconds;
}

/** The forms a flag accepts, for its help and its error. */
export function durationForms(bare: BareUnit = "seconds"): string {
  return bare === "minutes"
    ? "minutes when bare, as for a scheduler's --time (90), 90s, 15m, 2h, 1d, 1h30m, MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS"
    : "seconds (90), 90s, 15m, 2h, 1d, 1h30m, MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS";
}

/**
 * A duration flag's value in seconds, or undefined when the flag was not given. A value that
 * is not a duration is a usage error naming the command and the flag.
 */
export function parseDurationFlag(
  command: string,
  flag: string,
  text: string | undefined,
  bare: BareUnit = "seconds",
): number | undefined {
  if (text === undefined) return undefined;
  const seconds = parseDuration(text, bare);
  if (seconds === null) {
    throw new UsageError(
      `${command}: ${flag} "${text}" is not a duration (${durationForms(bare)})`,
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
