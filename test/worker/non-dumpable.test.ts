import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { makeNonDumpable } from "../../src/apps/worker/non-dumpable.ts";

const isRoot = process.geteuid?.() === 0;
const MODULE = join(import.meta.dir, "..", "..", "src", "apps", "worker", "non-dumpable.ts");
const AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"];

describe("makeNonDumpable", () => {
  test("a prctl that fails, or leaves the flag set, is a failure, never silence", () => {
    expect(makeNonDumpable(() => () => -1)).toEqual({
      kind: "Failed",
      message: "prctl(PR_SET_DUMPABLE, 0) failed",
    });
    // PR_SET_DUMPABLE "succeeds" but PR_GET_DUMPABLE still says 1.
    expect(makeNonDumpable(() => (option) => (option === 4 ? 0 : 1)).kind).toBe("Failed");
    expect(
      makeNonDumpable(() => {
        throw new Error("no libc.so.6");
      }),
    ).toMatchObject({ kind: "Failed", message: expect.stringContaining("no libc.so.6") });
  });

  // As root: both processes run as nobody, so only the dumpable flag stands between them.
  test.skipIf(!isRoot)(
    "another process of the same uid can no longer read its environment or memory",
    async () => {
      const script = [
        `const { makeNonDumpable } = await import(${JSON.stringify(MODULE)});`,
        "console.log(JSON.stringify(makeNonDumpable()));",
        "for await (const _ of Bun.stdin.stream()) {}",
      ].join("\n");
      const holder = Bun.spawn([...AS_NOBODY, process.execPath, "-e", script], {
        stdin: "pipe",
        stdout: "pipe",
        stderr: "pipe",
        env: { PATH: "/usr/bin:/bin", O4S_TEST_SECRET: "hunter2" },
      });
      try {
        const reader = holder.stdout.getReader();
        const first = new TextDecoder().decode((await reader.read()).value);
        expect(JSON.parse(first)).toEqual({ kind: "NonDumpable" });
        for (const file of ["environ", "mem"]) {
          const peek = Bun.spawnSync(
            [...AS_NOBODY, "/usr/bin/head", "-c", "64", `/proc/${holder.pid}/${file}`],
            { stdout: "pipe", stderr: "pipe" },
          );
          expect(peek.stdout.toString()).not.toContain("hunter2");
          expect(peek.stderr.toString()).toContain("Permission denied");
        }
      } finally {
        holder.stdin.end();
        holder.kill();
        await holder.exited;
      }
    },
    20_000,
  );
});
