/** The support layer's own promises: what other tests lean on must fail when it should. */
import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "./eventually.ts";
import { makeTempDir, removeDir, tempDir, tempDirs } from "./temp-dir.ts";

describe("eventually", () => {
  test("returns the first value that is not null, undefined or false; a throw is not yet", async () => {
    let calls = 0;
    const value = await eventually(
      () => {
        calls += 1;
        if (calls === 1) throw new Error("not there yet");
        if (calls === 2) return false;
        if (calls === 3) return null;
        return { calls };
      },
      { intervalMs: 1 },
    );
    expect(value).toEqual({ calls: 4 });
  });

  test("fails at the deadline naming what it awaited and the last thing seen", async () => {
    const failure = await eventually(
      () => {
        throw new Error("still QUEUED");
      },
      { what: "RUNNING", timeoutMs: 30, intervalMs: 5 },
    ).catch((error: Error) => error.message);
    expect(failure).toContain("RUNNING");
    expect(failure).toContain("still QUEUED");
  });
});

describe("temp dirs", () => {
  let kept = "";
  const make = tempDirs("o4s-support-", "each");

  test("a maker's dirs exist during the test", () => {
    kept = make();
    writeFileSync(join(kept, "f"), "x");
    expect(existsSync(join(kept, "f"))).toBe(true);
  });

  test("and are gone after it", () => {
    expect(kept).not.toBe("");
    expect(existsSync(kept)).toBe(false);
  });

  test("using: gone when the block ends, even when it throws", () => {
    let path = "";
    expect(() => {
      using dir = tempDir("o4s-support-");
      path = dir.path;
      writeFileSync(join(path, "f"), "x");
      throw new Error("an assertion failed");
    }).toThrow("an assertion failed");
    expect(path).not.toBe("");
    expect(existsSync(path)).toBe(false);
  });

  test("a supervisor still running under a removed dir is stopped first, so it cannot make it again", async () => {
    const dir = makeTempDir("o4s-support-");
    const jobDir = join(dir, "backend", "jobs", "j1");
    // Stands in for `openai4s __supervise`: its job dir in its argv, and on SIGTERM it writes
    // its record with mkdir -p, as the real one writes its logs after a late start.
    const script = `trap 'mkdir -p "$1/logs" && echo ended > "$1/logs/exit"; exit 0' TERM; echo up > "$2"; while :; do sleep 0.05; done`;
    const ready = join(makeTempDir("o4s-support-"), "up");
    const child = Bun.spawn(["sh", "-c", script, "__supervise", jobDir, ready], {
      stdio: ["ignore", "ignore", "ignore"],
    });
    // argv of `sh -c SCRIPT __supervise JOBDIR` is [sh, -c, SCRIPT, __supervise, JOBDIR, READY].
    await eventually(() => existsSync(ready), { what: "the stand-in supervisor up" });
    removeDir(dir);
    await child.exited;
    expect(existsSync(dir)).toBe(false);
    removeDir(join(ready, ".."));
  });
});
