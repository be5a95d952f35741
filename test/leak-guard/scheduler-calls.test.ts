/**
 * INV-9 on the real tree: no scheduler command is started anywhere in src/ but the broker
 * (and the batch script's own in-job squeue, exempt with its reason). Each rule is shown
 * biting on a doctored copy of the tree.
 */
import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync } from "node:fs";
import { join } from "node:path";
import {
  findSchedulerSpawns,
  formatSpawnViolations,
  SHELL_TEXT_EXEMPT,
} from "../support/scheduler-calls.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

describe("INV-9: every scheduler call goes through the broker", () => {
  test("no scheduler command is started outside the broker", () => {
    expect(formatSpawnViolations(findSchedulerSpawns(SRC))).toBe("");
  });

  test("each exemption is still needed (else delete it)", () => {
    const found = findSchedulerSpawns(SRC, {});
    for (const file of Object.keys(SHELL_TEXT_EXEMPT)) {
      expect(found.some((v) => v.file === file && v.detail.startsWith("shell text"))).toBe(true);
    }
  });
});

describe("the guard bites (planted in a temporary copy)", () => {
  const newDir = tempDirs("o4s-inv9-", "each");

  test.each([
    ["a ProgramRunner request", 'export const r = { program: "squeue", args: [] };\n', "squeue"],
    ["a path to the command", "export const r = { program: '/usr/bin/sacct' };\n", "sacct"],
    [
      "a Bun.spawn argv",
      'export const p = () => Bun.spawn(["scontrol", "show", "job"]);\n',
      "scontrol",
    ],
    ["a python subprocess argv", 'subprocess.run(["sinfo", "-h"])\n', "sinfo"],
    ["shell text", 'export const s = "x=$(sacctmgr -n show assoc)";\n', "sacctmgr"],
    ["shell text with a variable", "export const s = 'scancel $JOB';\n", "scancel"],
    ["a child_process import", 'import { spawn } from "node:child_process";\n', "child_process"],
  ])("%s", (_label, planted, expected) => {
    const copy = join(newDir(), "src");
    cpSync(SRC, copy, { recursive: true });
    appendFileSync(join(copy, "adapters", "backend-slurm", "backend.ts"), planted);
    const found = formatSpawnViolations(findSchedulerSpawns(copy));
    expect(found).toContain("adapters/backend-slurm/backend.ts");
    expect(found).toContain(expected);
  });
});
