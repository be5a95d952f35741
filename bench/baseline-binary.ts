/**
 * Another build of the binary, for a bench that compares this checkout with an earlier one
 * side by side in one run: `O4S_BENCH_BASELINE_BINARY=/path/to/openai4s` as given, else the
 * tree of `O4S_BENCH_BASELINE_REF` (default: the merge base with `main`, i.e. "today's")
 * exported with `git archive` into a temporary directory and built there. Nothing in the
 * repository or its worktrees is touched.
 */
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUN, ROOT } from "../test/support/binary.ts";

export interface Baseline {
  readonly binary: string;
  /** What it was built from, for the bench's report. */
  readonly ref: string;
  dispose(): void;
}

function git(...args: string[]): string {
  const r = Bun.spawnSync(["git", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString().trim();
}

export function baselineBinary(): Baseline {
  const given = process.env["O4S_BENCH_BASELINE_BINARY"];
  if (given) return { binary: given, ref: given, dispose: () => {} };
  const ref = process.env["O4S_BENCH_BASELINE_REF"] ?? git("merge-base", "HEAD", "main");
  const commit = git("rev-parse", "--short", ref);
  const dir = mkdtempSync(join(tmpdir(), "o4s-baseline-"));
  const archive = Bun.spawnSync(
    ["bash", "-c", `git archive ${commit} | tar -x -C "$1"`, "x", dir],
    {
      cwd: ROOT,
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  if (archive.exitCode !== 0) throw new Error(`git archive ${commit}: ${archive.stderr}`);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  const built = Bun.spawnSync([BUN, "build.ts"], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  const binary = join(dir, "dist", "openai4s");
  if (built.exitCode !== 0 || !existsSync(binary))
    throw new Error(`building ${commit}: ${built.stderr.toString().slice(-2000)}`);
  return { binary, ref: commit, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}
