import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { formatDuration, parseDuration } from "../../src/apps/cli/duration.ts";

describe("parseDuration", () => {
  test.each([
    ["90", 90],
    ["90s", 90],
    ["15m", 900],
    ["2h", 7200],
    ["1h30m", 5400],
    ["1h30m15s", 5415],
    ["1h15s", 3615],
    ["01:30:00", 5400],
    ["100:00:01", 360001],
    ["0:00:05", 5],
    // Slurm's own forms, as sbatch --time reads them.
    ["45:00", 2700],
    ["1:30", 90],
    ["90:00", 5400],
    ["1-00:00:00", 86400],
    ["2-12", 216000],
    ["1-01:30", 91800],
    ["0-00:00:30", 30],
    ["5d", 432000],
    ["1d12h", 129600],
  ])("%s is %d seconds", (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  test.each([
    "",
    "0",
    "0s",
    "00:00:00",
    "1.5h",
    "90sec",
    "1m1h",
    "h",
    "-5",
    "1:60:00",
    "1 h",
    "1-24",
    "1-",
    "-1-00",
    "1-00:60",
    "1:2:3:4",
    ":30",
    "1d1d",
    "1e3",
    " 90",
  ])("%p is refused", (text) => {
    expect(parseDuration(text)).toBeNull();
  });

  test("a bare number is minutes where the flag follows Slurm, seconds elsewhere", () => {
    expect(parseDuration("90", "minutes")).toBe(5400);
    expect(parseDuration("90", "seconds")).toBe(90);
    // Every other form means the same under both.
    expect(parseDuration("45:00", "minutes")).toBe(2700);
    expect(parseDuration("2h", "minutes")).toBe(7200);
  });

  test("formatDuration and parseDuration round-trip every positive duration", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000_000 }), (seconds) => {
        expect(parseDuration(formatDuration(seconds))).toBe(seconds);
      }),
    );
  });
});
