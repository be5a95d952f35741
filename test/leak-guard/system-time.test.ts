/**
 * The system time enters at a program's edge: `systemTimers` and `systemClock` are named
 * only in lib/, in each program's composition and at its entry points, which pass them
 * inward; the core, the servers and the adapters take theirs as a dependency. Each rule is
 * shown biting on a doctored copy of the tree.
 */
import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, existsSync } from "node:fs";
import { join } from "node:path";
import {
  findSystemTimeUses,
  formatSystemTimeUses,
  SYSTEM_TIME_ENTRY_POINTS,
  SYSTEM_TIME_PENDING,
} from "../support/system-time-imports.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SRC = join(import.meta.dir, "..", "..", "src");
const PLANT = 'import { systemTimers } from "../../lib/clock.ts";';

describe("the system time enters at the edge", () => {
  const newDir = tempDirs("o4s-system-time-", "each");

  test("no systemTimers or systemClock outside lib/, the compositions and the entry points", () => {
    expect(formatSystemTimeUses(findSystemTimeUses(SRC))).toBe("");
  });

  test("every listed entry point and pending file exists (a stale list guards nothing)", () => {
    for (const file of [...SYSTEM_TIME_ENTRY_POINTS, ...SYSTEM_TIME_PENDING]) {
      expect(existsSync(join(SRC, file))).toBe(true);
    }
  });

  test.each([
    ["the core", "core/session/readiness.ts"],
    ["a server", "servers/http/jupyter/hub.ts"],
    ["an adapter", "adapters/backend-local/backend.ts"],
    ["an app's inner module", "apps/worker/worker.ts"],
  ])("bites on an import in %s", (_label, file) => {
    const copy = join(newDir(), "src");
    cpSync(SRC, copy, { recursive: true });
    appendFileSync(join(copy, file), `\n${PLANT}\n// systemClock in a comment is fine\n`);
    const found = findSystemTimeUses(copy);
    expect(found.map((t) => t.file)).toEqual([file]);
    expect(found[0]?.text).toBe(PLANT);
  });

  test("a composition may (it is where the time is handed inward)", () => {
    const copy = join(newDir(), "src");
    cpSync(SRC, copy, { recursive: true });
    appendFileSync(join(copy, "apps", "daemon", "composition", "core.ts"), `\n${PLANT}\n`);
    expect(findSystemTimeUses(copy)).toEqual([]);
  });
});
