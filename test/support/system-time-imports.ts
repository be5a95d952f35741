/**
 * Finds uses of the system time (`systemTimers`, `systemClock` from lib/clock.ts) in a source
 * tree outside the places that compose a program: lib/ (where they are defined) and the
 * entry points and composition of each program, which pass them inward. Anywhere else a
 * default of the real clock is a wait or a time no test can move (the failure: a module took
 * `options.timers ?? systemTimers`, so a caller that forgot to pass its timeline ran on real
 * time, and the test slept instead of advancing).
 */

import { readFileSync } from "node:fs";
import { relative, sep } from "node:path";
import { sourceFiles, withoutComments } from "./raw-timers.ts";

export interface SystemTimeUse {
  /** Relative to the tree's root, with forward slashes. */
  readonly file: string;
  readonly line: number;
  readonly text: string;
}

const USE = /\bsystem(?:Timers|Clock)\b/;

/** Where a program is composed: its entry point hands the system time inward from there. */
export const SYSTEM_TIME_ENTRY_POINTS: ReadonlySet<string> = new Set([
  // The daemon: its composition root and its subcommands' entry points.
  "apps/daemon/daemon.ts",
  "apps/daemon/serve-command.ts",
  "apps/daemon/restore-command.ts",
  // The worker program's entry point.
  "apps/worker/worker-command.ts",
  // The local supervisor, a program of its own (`openai4s supervise`), and its entry point.
  "adapters/backend-local/supervise-command.ts",
  // A worker thread's entry point (thread-entrypoints.ts): it is only sent messages.
  "adapters/store-sqlite/wal-checkpointer-worker.ts",
]);

/**
 * Not yet passed their time from the entry point; each would be a debt, not a rule. None is
 * left: the flag parser takes the site's accounts (and their clock) from serve's entry point,
 * the orphan sweeper its timers from the Slurm plugin.
 */
export const SYSTEM_TIME_PENDING: ReadonlySet<string> = new Set<string>();

function isAllowed(file: string): boolean {
  return (
    file.startsWith("lib/") ||
    /^apps\/[^/]+\/composition\//.test(file) ||
    SYSTEM_TIME_ENTRY_POINTS.has(file) ||
    SYSTEM_TIME_PENDING.has(file)
  );
}

/** Every use of the system time under `root` (a `src/` tree) where it may not be. */
export function findSystemTimeUses(root: string): SystemTimeUse[] {
  const found: SystemTimeUse[] = [];
  for (const path of sourceFiles(root)) {
    const file = relative(root, path).split(sep).join("/");
    if (isAllowed(file)) continue;
    const lines = withoutComments(readFileSync(path, "utf8")).split("\n");
    lines.forEach((text, i) => {
      if (USE.test(text)) found.push({ file, line: i + 1, text: text.trim() });
    });
  }
  return found;
}

export function formatSystemTimeUses(found: readonly SystemTimeUse[]): string {
  return found.map((t) => `${t.file}:${t.line}: ${t.text}`).join("\n");
}
