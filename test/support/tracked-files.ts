/** The files git tracks in this checkout, relative to its root: what a clone would hold. */
import { join } from "node:path";

export const REPO_ROOT = join(import.meta.dir, "..", "..");

export function trackedFiles(): string[] {
  const run = Bun.spawnSync(["git", "ls-files", "-z"], { cwd: REPO_ROOT, stdout: "pipe" });
  if (run.exitCode !== 0) throw new Error("git ls-files failed");
  return run.stdout
    .toString()
    .split("\0")
    .filter((f) => f !== "");
}
