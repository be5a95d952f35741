/**
 * The batch script is one of the few places a shell exists: property-test the quoting by
 * running the generated script under the real /bin/sh and reading back the argv it executes.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { renderBatchScript, shellQuote } from "../../src/adapters/backend-slurm/batch-script.ts";
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
        "exec 'srun' '--export=ALL' '--nodes=3' '--ntasks=3' '--ntasks-per-node=1' '--kill-on-bad-exit=1' '/opt/w' '--credential-dir' '/s/c' '--rank-env' 'SLURM_PROCID' '--node-env' 'SLURMD_NODENAME'",
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

describe("a TASKS script (multi-task BATCH)", () => {
  /**
   * A stand-in for srun: drops its own options, then runs the task command once with the
   * launcher's variables (one task, node 0), as srun does on each node.
   */
  const fakeLauncher = join(dir, "fake-srun");
  writeFileSync(
    fakeLauncher,
    [
      "#!/bin/sh",
      'echo "launcher: $*" | head -c 120 >> "$LAUNCHES"; echo >> "$LAUNCHES"',
      'while [ "$1" != /bin/sh ]; do shift; done',
      'SLURM_JOB_ID=987654321 SLURM_NODEID=0 exec "$@"',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  const nodeDir =
    process.getuid?.() === 0
      ? "/run/openai4s-tasks/987654321.0"
      : `/tmp/openai4s-tasks-${process.getuid?.()}/987654321.0`;

  /** The task's command prints its argv (one per line) and how its node dir's tmp/ is owned. */
  async function runTasks(command: readonly string[]) {
    const rendered = renderBatchScript({
      kind: "TASKS",
      launcher: fakeLauncher,
      count: 2,
      perNode: 2,
      mpi: "pmi2",
      owner: { uid: 4321, gid: 4322 },
      command,
    });
    if (rendered.kind !== "Rendered") throw new Error(rendered.message);
    const path = join(dir, "tasks.sh");
    writeFileSync(path, rendered.script, { mode: 0o700 });
    const launches = join(dir, "launches.txt");
    writeFileSync(launches, "");
    const child = Bun.spawn({
      cmd: ["/bin/sh", path],
      stdout: "pipe",
      stderr: "pipe",
      env: { PATH: "/usr/bin:/bin", SLURM_JOB_NUM_NODES: "1", LAUNCHES: launches },
    });
    const [out, err, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    return { out, err, code, launches: await Bun.file(launches).text() };
  }

  test.skipIf(process.getuid?.() !== 0)(
    "the node dir is made for the job's uid, replaces the placeholder before '--' only, and goes after",
    async () => {
      const inspect = `stat -c "%u:%g %a" "$1" "\${1%/tmp}/shm"; for a do echo "$a"; done`;
      const placeholder = "/openai4s-node-tmp-placeholder";
      const r = await runTasks([
        "/bin/sh",
        "-c",
        inspect,
        "inspect",
        `${placeholder}/tmp`,
        "--",
        `${placeholder}/tmp`,
      ]);
      expect(r.err).toBe("");
      const lines = r.out.trim().split("\n");
      // $1 was replaced (it precedes "--"): the owner line is about the real node dir.
      expect(lines.slice(0, 2)).toEqual(["4321:4322 700", "4321:4322 700"]);
      const argv = lines.slice(2);
      expect(argv[0]).toBe(`${nodeDir}/tmp`);
      // Before the sandbox's "--": the node's network interfaces, read-only.
      const dash = argv.indexOf("--");
      expect(argv.slice(1, dash)).toContain("/sys/class/net");
      expect(argv.slice(1, dash)).toContain("--ro-bind-try");
      // After it (the job's own argv), nothing is rewritten.
      expect(argv.slice(dash + 1)).toEqual([`${placeholder}/tmp`]);
      expect(r.code).toBe(0);
      // The main step asked for the tasks and the plugin; the cleanup step removed the dir.
      expect(r.launches).toContain("--ntasks=2 --ntasks-per-node=2 --mpi=pmi2");
      expect(existsSync(nodeDir)).toBe(false);
    },
  );

  test("the job's exit status is the tasks', after the cleanup step", async () => {
    const r = await runTasks(["/bin/sh", "-c", "exit 7"]);
    expect(r.code).toBe(7);
    expect(r.launches.split("\n").filter((l) => l.startsWith("launcher:"))).toHaveLength(2);
    expect(existsSync(nodeDir)).toBe(false);
  });

  test("bad counts, a bad plugin name and an empty command are refused", () => {
    const base = {
      kind: "TASKS",
      launcher: "srun",
      count: 2,
      perNode: null,
      mpi: null,
      owner: null,
      command: ["/bin/true"],
    } as const;
    expect(renderBatchScript(base).kind).toBe("Rendered");
    expect(renderBatchScript({ ...base, count: 0 }).kind).toBe("Invalid");
    expect(renderBatchScript({ ...base, perNode: 0 }).kind).toBe("Invalid");
    expect(renderBatchScript({ ...base, mpi: "pmi2 --x" }).kind).toBe("Invalid");
    expect(renderBatchScript({ ...base, command: [] }).kind).toBe("Invalid");
  });
});
