import { describe, expect, test } from "bun:test";
import { parseMemoryMb } from "../../src/apps/cli/memory.ts";

describe("parseMemoryMb: as a scheduler's --mem reads it", () => {
  test.each([
    ["300", 300],
    ["300M", 300],
    ["300m", 300],
    ["300MB", 300],
    ["2G", 2048],
    ["2gb", 2048],
    ["1T", 1024 * 1024],
    ["512000K", 500],
  ])("%s is %d MB", (text, mb) => {
    expect(parseMemoryMb(text)).toBe(mb);
  });

  test.each(["", "0", "0G", "1.5G", "300 M", "300MiB", "-1", "1K", "G", "2P", "1e3"])(
    "%p is refused",
    (text) => {
      expect(parseMemoryMb(text)).toBeNull();
    },
  );
});
