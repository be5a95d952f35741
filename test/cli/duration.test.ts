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
    "1:00",
    "1 h",
    "5d",
    "1e3",
    " 90",
  ])("%p is refused", (text) => {
    expect(parseDuration(text)).toBeNull();
  });

  test("formatDuration and parseDuration round-trip every positive duration", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000_000 }), (seconds) => {
        expect(parseDuration(formatDuration(seconds))).toBe(seconds);
      }),
    );
  });
});
