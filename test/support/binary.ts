/**
 * The built binary, for tests that must run what admins run: builds `dist/openai4s` when it
 * is missing or older than any source file (the build takes ~10-20 s).
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

export const ROOT = join(import.meta.dir, "..", "..");
export const BINARY = join(ROOT, "dist", "openai4s");
export const BUN = join(ROOT, "node_modules", ".bin", "bun");

function newestSourceMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSourceMtimeMs(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** Builds the binary unless it is newer than every source file. */
export function ensureBuilt(): void {
  const sources = Math.max(
    newestSourceMtimeMs(join(ROOT, "src")),
    statSync(join(ROOT, "build.ts")).mtimeMs,
  );
  if (existsSync(BINARY) && statSync(BINARY).mtimeMs > sources) return;
  const built = Bun.spawnSync([BUN, "build.ts"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (built.exitCode !== 0) {
    throw new Error(`build failed:\n${built.stdout.toString()}\n${built.stderr.toString()}`);
  }
}
