/**
 * Finds raw timers in a source tree: `setTimeout`, `setInterval`, `Bun.sleep` and the
 * `node:timers` modules anywhere but `lib/`, where the one timer port (`lib/clock.ts`:
 * `Timers`, `every`, `sleep`, `withDeadline`) wraps them. A raw timer is a wait no test can
 * move: it is why a test sleeps, and why a loop's period cannot be read off one place.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

export interface RawTimer {
  /** Relative to the tree's root, with forward slashes. */
  readonly file: string;
  readonly line: number;
  readonly text: string;
}

const RAW =
  /\b(?:setTimeout|setInterval)\s*\(|\bBun\s*\.\s*sleep(?:Sync)?\s*\(|["']node:timers(?:\/promises)?["']|["']timers(?:\/promises)?["']/;

/** Comments blanked (newlines kept, so line numbers hold): a comment may name a timer. */
export function withoutComments(source: string): string {
  return source
    .replace(/\/\*[\s\S]*?\*\//g, (block) => block.replace(/[^\n]/g, " "))
    .replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (/\.(?:ts|tsx|js|mjs)$/.test(name)) out.push(path);
  }
  return out;
}

/** Every raw timer under `root` (a `src/` tree) outside `root/lib/`. */
export function findRawTimers(root: string): RawTimer[] {
  const found: RawTimer[] = [];
  for (const path of sourceFiles(root)) {
    const file = relative(root, path).split(sep).join("/");
    if (file.startsWith("lib/")) continue;
    const lines = withoutComments(readFileSync(path, "utf8")).split("\n");
    lines.forEach((text, i) => {
      if (RAW.test(text)) found.push({ file, line: i + 1, text: text.trim() });
    });
  }
  return found;
}

export function formatRawTimers(found: readonly RawTimer[]): string {
  return found.map((t) => `${t.file}:${t.line}: ${t.text}`).join("\n");
}
