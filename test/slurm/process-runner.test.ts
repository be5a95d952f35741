/** The process runner with real processes: group kill, byte caps, missing binaries, env. */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { createProgramRunner, type ProcessRequest } from "../../src/lib/process-runner.ts";
import { eventually } from "../support/eventually.ts";

const runner = createProgramRunner();
const base: ProcessRequest = {
  program: "sh",
  args: [],
  env: { PATH: "/usr/bin:/bin" },
  timeoutMs: 5_000,
  maxOutputBytes: 1024 * 1024,
  overflow: "fail",
  killGraceMs: 0,
};

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

describe("process runner", () => {
  test("an argv element is never interpreted by a shell", async () => {
    const outcome = await runner.run({
      ...base,
      program: "printf",
      args: ["%s|", "a; echo pwned", "$(id)"],
    });
    expect(outcome).toMatchObject({ kind: "Exited", exitCode: 0, stdout: "a; echo pwned|$(id)|" });
  });

  test("the child gets exactly the environment it is given", async () => {
    const outcome = await runner.run({
      ...base,
      program: "env",
      env: { PATH: "/usr/bin:/bin", ONLY: "1" },
    });
    if (outcome.kind !== "Exited") throw new Error(outcome.kind);
    expect(outcome.stdout.trim().split("\n").sort()).toEqual(["ONLY=1", "PATH=/usr/bin:/bin"]);
  });

  test("a program missing from PATH is NotFound, not an empty answer", async () => {
    const outcome = await runner.run({ ...base, program: "squeue", env: { PATH: "/nonexistent" } });
    expect(outcome.kind).toBe("NotFound");
  });

  test("a timeout kills the whole process group, grandchildren included", async () => {
    const started = performance.now();
    const outcome = await runner.run({
      ...base,
      args: ["-c", "sleep 30 & echo $! ; wait"],
      timeoutMs: 300,
    });
    expect(outcome.kind).toBe("TimedOut");
    expect(performance.now() - started).toBeLessThan(3_000);
    if (outcome.kind !== "TimedOut") return;
    const grandchild = Number(outcome.stdout.trim());
    expect(grandchild).toBeGreaterThan(0);
    await eventually(() => !alive(grandchild), {
      what: "the grandchild gone",
      timeoutMs: 2_000,
      intervalMs: 20,
    });
  });

  test("a step timeout sends SIGTERM first, then SIGKILL after the grace", async () => {
    const outcome = await runner.run({
      ...base,
      args: ["-c", "trap 'echo term; exit 7' TERM; while :; do sleep 0.05; done"],
      timeoutMs: 200,
      killGraceMs: 2_000,
    });
    expect(outcome).toMatchObject({ kind: "TimedOut", stdout: "term\n" });
  });

  test("output over the cap voids a control command's answer (a cut listing is not a listing)", async () => {
    const outcome = await runner.run({
      ...base,
      program: "head",
      args: ["-c", "300000", "/dev/zero"],
      maxOutputBytes: 100_000,
    });
    expect(outcome.kind).toBe("Overflowed");
  });

  test("a step's output over the cap is truncated and drained, and the step runs to its end", async () => {
    const outcome = await runner.run({
      ...base,
      args: ["-c", "head -c 300000 /dev/zero; echo done >&2; exit 3"],
      maxOutputBytes: 100_000,
      overflow: "truncate",
    });
    expect(outcome).toMatchObject({
      kind: "Exited",
      exitCode: 3,
      stderr: "done\n",
      truncated: ["stdout"],
    });
    if (outcome.kind === "Exited") expect(outcome.stdout.length).toBe(100_000);
  });

  test("a signal death is reported as such", async () => {
    const outcome = await runner.run({ ...base, args: ["-c", "kill -9 $$"] });
    expect(outcome).toMatchObject({ kind: "Exited", exitCode: null, signal: "SIGKILL" });
  });
});
