/**
 * One timer port: no raw timer anywhere in src/ but lib/ (lib/clock.ts wraps them), so every
 * wait goes through `Timers` and a test can move it. Each rule is shown biting on a doctored
 * copy of the tree.
 */
import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync } from "node:fs";
import { join } from "node:path";
import { findRawTimers, formatRawTimers } from "../support/raw-timers.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

describe("one timer port", () => {
  const newDir = tempDirs("o4s-timers-", "each");

  test("no raw timer outside src/lib/", () => {
    expect(formatRawTimers(findRawTimers(SRC))).toBe("");
  });

  test("lib/ itself may (it is where the port meets the runtime)", () => {
    // The guard would be vacuous if the scanner could not see a timer at all.
    const copy = join(newDir(), "src");
    cpSync(SRC, copy, { recursive: true });
    appendFileSync(join(copy, "lib", "clock.ts"), "export const t = setTimeout(() => {}, 1);\n");
    expect(findRawTimers(copy)).toEqual([]);
  });

  test.each([
    ["a setTimeout in the core", "core/session/presence.ts", "setTimeout(() => {}, 5);"],
    [
      "a setInterval in an adapter",
      "adapters/backend-slurm/orphan-sweeper.ts",
      "const t = setInterval(f, 1000);",
    ],
    ["a Bun.sleep in a server", "servers/http/validation.ts", "await Bun.sleep(10);"],
    [
      "the timers module in an app",
      "apps/daemon/daemon.ts",
      'import { setTimeout as wait } from "node:timers/promises";',
    ],
  ])("bites on %s", (_label, file, planted) => {
    const copy = join(newDir(), "src");
    cpSync(SRC, copy, { recursive: true });
    appendFileSync(join(copy, file), `\n${planted}\n// setTimeout( in a comment is fine\n`);
    const found = findRawTimers(copy);
    expect(found.map((t) => t.file)).toEqual([file]);
    expect(found[0]?.text).toBe(planted);
  });
});
