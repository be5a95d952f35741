/**
 * INV-9's guard: every scheduler call goes through the broker (src/adapters/backend-slurm/
 * broker.ts). A function over a source tree, so a test can run it on a doctored copy too.
 *
 * What counts as starting a scheduler command, outside the broker, in code (comment lines
 * skipped) of any source file:
 *  - a command name (or a path ending in one) as a `program:` (a ProgramRunner request) or
 *    as the first element of an array (an argv for Bun.spawn, child_process, subprocess);
 *  - shell text that runs one: the name as a shell word followed by an option or argument
 *    (`squeue -h ...`) inside a string;
 *  - any child_process import or Bun.$ shell, which no file here needs.
 * The one justified exception is listed in SHELL_TEXT_EXEMPT with its reason.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { LISTED_BACKENDS } from "./backend-list.ts";

export const SCHEDULER_COMMANDS = [
  "sbatch",
  "squeue",
  "sacct",
  "scancel",
  "scontrol",
  "srun",
  "sinfo",
  "sacctmgr",
] as const;

/**
 * The brokers: the one module of each listed backend that starts scheduler commands, as its
 * plugin names it (backend-list.ts).
 */
export const BROKER_FILES: readonly string[] = LISTED_BACKENDS.flatMap((b) =>
  b.schedulerBroker === null ? [] : [`${b.folder}${b.schedulerBroker}`],
);

/** Files whose shell text may run a scheduler command, each with why it is not the daemon's. */
export const SHELL_TEXT_EXEMPT: Readonly<Record<string, string>> = {
  "adapters/backend-slurm/batch-script.ts":
    "the batch script's deadline squeue runs inside the job, on the node, as the job's uid, " +
    "once at its start and only about its own job id: no daemon process, and no broker there; " +
    "likewise the srun that starts a multi-task job's tasks inside its own allocation",
};

export interface SpawnViolation {
  readonly file: string;
  readonly line: number;
  readonly detail: string;
}

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...walk(path));
    else out.push(path);
  }
  return out;
}

const NAMES = SCHEDULER_COMMANDS.join("|");
/** A quoted command name, optionally behind a directory: "sbatch", '/usr/bin/squeue'. */
const QUOTED = `["'\`](?:[^"'\`\\s]*/)?(${NAMES})["'\`]`;
const AS_PROGRAM = new RegExp(`program\\s*[:=]\\s*${QUOTED}`);
const AS_ARGV_HEAD = new RegExp(`\\[\\s*${QUOTED}`);
/**
 * Inside a string: the name as a shell word, then an option or a quoted or shell-variable
 * argument (`${` is a template's own interpolation, e.g. a displayed command line).
 */
const AS_SHELL_WORD = new RegExp(`(?:^|[\\s;|&(\`"'])(${NAMES})\\s+(?:[-"']|\\$(?!\\{))`);
const OTHER_SPAWNERS: readonly [RegExp, string][] = [
  [/["'](?:node:)?child_process["']/, "child_process"],
  [/\bBun\.\$/, "Bun.$ shell"],
];

function isCommentLine(text: string): boolean {
  const t = text.trimStart();
  return t.startsWith("//") || t.startsWith("*") || t.startsWith("/*") || t.startsWith("#");
}

export function findSchedulerSpawns(
  srcRoot: string,
  shellTextExempt: Readonly<Record<string, string>> = SHELL_TEXT_EXEMPT,
): SpawnViolation[] {
  const violations: SpawnViolation[] = [];
  for (const path of walk(srcRoot)) {
    const file = relative(srcRoot, path).split(sep).join("/");
    if (BROKER_FILES.includes(file)) continue;
    readFileSync(path, "utf8")
      .split("\n")
      .forEach((text, i) => {
        if (isCommentLine(text)) return;
        const add = (detail: string) => violations.push({ file, line: i + 1, detail });
        const program = AS_PROGRAM.exec(text) ?? AS_ARGV_HEAD.exec(text);
        if (program !== null) add(`starts ${program[1]} outside the broker`);
        const shell = AS_SHELL_WORD.exec(text);
        if (shell !== null && !Object.hasOwn(shellTextExempt, file)) {
          add(`shell text runs ${shell[1]}`);
        }
        for (const [pattern, what] of OTHER_SPAWNERS) if (pattern.test(text)) add(what);
      });
  }
  return violations;
}

export function formatSpawnViolations(violations: readonly SpawnViolation[]): string {
  return violations.map((v) => `${v.file}:${v.line}: ${v.detail}`).join("\n");
}
