/**
 * The batch script is one of the few places a shell exists: property-test the quoting by
 * running the generated script under the real /bin/sh and reading back the argv it executes.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { renderBatchScript, shellQuote } from "../../src/orchestration/slurm/batch-script.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const dir = makeTempDir("o4s-batch-script-");
afterAll(() => removeDir(dir));

const NASTY = [
  "'",
  '"',
  "\\",
  "$",
  "`",
  "$(id)",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion the quoting must keep inert
  "${HOME}",
  "!",
  "*",
  "?",
  "[a]",
  "~",
  "\n",
  "\t",
  " ",
  ";",
  "&",
  "|",
  ">",
  "<",
  "#",
  "#SBATCH --export=ALL",
  "%j",
  "-",
  "--",
  "é",
  "😀",
  "a",
  "",
];
const arg = fc.oneof(
  fc.array(fc.constantFrom(...NASTY), { maxLength: 6 }).map((p) => p.join("")),
  fc.string({ unit: "binary", maxLength: 12 }).filter((s) => !s.includes("\0")),
);

/** Runs the script with its program replaced by printf, so the argv it would exec comes back. */
async function argvExecutedBy(args: readonly string[]): Promise<string[]> {
  const rendered = renderBatchScript({
    kind: "COMMAND",
    command: ["/usr/bin/printf", "%s\\0", "sentinel", ...args],
  });
  if (rendered.kind !== "Rendered") throw new Error(rendered.message);
  const path = join(dir, "job.sh");
  writeFileSync(path, rendered.script, { mode: 0o700 });
  const child = Bun.spawn({
    cmd: ["/bin/sh", path],
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: "/usr/bin:/bin" },
  });
  const out = await new Response(child.stdout).text();
  expect(await child.exited).toBe(0);
  const parts = out.split("\0");
  parts.pop();
  expect(parts[0]).toBe("sentinel");
  return parts.slice(1);
}

describe("batch script", () => {
  test("every argument reaches the program exactly as given, under the real /bin/sh", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(arg, { maxLength: 5 }), async (args) => {
        expect(await argvExecutedBy(args)).toEqual(args);
      }),
      { numRuns: 150 },
    );
  });

  test("no argument can add an #SBATCH directive: the first command precedes every argument", () => {
    fc.assert(
      fc.property(fc.array(arg, { minLength: 1, maxLength: 4 }), (args) => {
        const rendered = renderBatchScript({ kind: "COMMAND", command: ["/bin/echo", ...args] });
        if (rendered.kind !== "Rendered") throw new Error(rendered.message);
        const lines = rendered.script.split("\n");
        // sbatch reads directives only up to the first line that is neither blank nor a comment.
        const firstCommand = lines.findIndex((l) => l.trim() !== "" && !l.startsWith("#"));
        expect(lines[firstCommand]).toBe("set -u");
        expect(lines.slice(0, firstCommand).some((l) => l.startsWith("#SBATCH"))).toBe(false);
      }),
    );
  });

  test("NUL, an empty command and an option-looking program are refused", () => {
    expect(shellQuote("a\0b").kind).toBe("Invalid");
    expect(renderBatchScript({ kind: "COMMAND", command: [] }).kind).toBe("Invalid");
    expect(renderBatchScript({ kind: "COMMAND", command: [""] }).kind).toBe("Invalid");
    expect(renderBatchScript({ kind: "COMMAND", command: ["-c", "x"] }).kind).toBe("Invalid");
    expect(renderBatchScript({ kind: "COMMAND", command: ["/bin/echo", "a\0"] }).kind).toBe(
      "Invalid",
    );
  });

  test("a WORKER script starts one task per rank and passes only the rank variable's name", () => {
    const rendered = renderBatchScript({
      kind: "WORKER",
      launcher: "srun",
      ranks: 3,
      workerCommand: ["/opt/w", "--credential-dir", "/s/c"],
      rankEnv: "SLURM_PROCID",
    });
    expect(rendered).toMatchObject({ kind: "Rendered" });
    if (rendered.kind === "Rendered") {
      expect(rendered.script).toContain(
        "exec 'srun' '--export=ALL' '--nodes=3' '--ntasks=3' '--ntasks-per-node=1' '--kill-on-bad-exit=1' '/opt/w' '--credential-dir' '/s/c' '--rank-env' 'SLURM_PROCID'",
      );
    }
    expect(
      renderBatchScript({
        kind: "WORKER",
        launcher: "srun",
        ranks: 0,
        workerCommand: ["/w"],
        rankEnv: "R",
      }).kind,
    ).toBe("Invalid");
    expect(
      renderBatchScript({
        kind: "WORKER",
        launcher: "srun",
        ranks: 1,
        workerCommand: ["/w"],
        rankEnv: "R;x",
      }).kind,
    ).toBe("Invalid");
  });
});
