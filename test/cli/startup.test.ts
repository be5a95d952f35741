/**
 * A short command loads only what it uses (bench/startup.bench.ts measures the time), and
 * the cheaper output path keeps what the streams gave: every byte in order, the exit code,
 * and a quiet end when the reader went away.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { COMMANDS } from "../../src/apps/cli/registry.ts";
import { BUN, ROOT } from "../support/binary.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-startup-", "each");

/** The module specifiers a source file imports statically (type-only imports left out). */
function staticImports(file: string): string[] {
  const text = readFileSync(join(ROOT, "src", file), "utf8");
  return [...text.matchAll(/^import\s+(?!type\s)[^;]*?from\s+"([^"]+)";/gms)].map(
    (m) => m[1] ?? "",
  );
}

describe("each command loads only what it uses", () => {
  test("main and the registry import no command module (they are loaded when run)", () => {
    expect(staticImports("main.ts").sort()).toEqual([
      "./apps/cli/registry.ts",
      "./lib/command/command.ts",
      "./lib/version.ts",
    ]);
    expect(staticImports("apps/cli/registry.ts")).toEqual([]);
  });

  test("the registry's names and summaries are the commands' own", async () => {
    for (const entry of COMMANDS) {
      const command = await entry.load();
      expect({
        name: command.name,
        summary: command.summary,
        hidden: command.hidden === true,
      }).toEqual({
        name: entry.name,
        summary: entry.summary,
        hidden: entry.hidden === true,
      });
    }
  });
});

describe("process output", () => {
  test("a reader that went away ends the command quietly with its exit code", () => {
    // The pipe's read end is closed before the command starts: its first write gets EPIPE.
    const ran = Bun.spawnSync(
      [
        "python3",
        "-c",
        [
          "import os, subprocess, sys",
          "r, w = os.pipe(); os.close(r)",
          "p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)",
          "sys.stdout.write(f'{p.returncode}\\n' + p.stderr.decode())",
        ].join("\n"),
        BUN,
        join(ROOT, "src", "main.ts"),
        "--help",
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
    expect(ran.stdout.toString()).toBe("0\n");
  });

  test("output larger than a pipe holds arrives whole, in order, with the exit code", async () => {
    const script = join(tempDir(), "write.ts");
    writeFileSync(
      script,
      [
        `import { processIo } from ${JSON.stringify(join(ROOT, "src", "lib", "command", "command.ts"))};`,
        "for (let i = 0; i < 40000; i++) processIo.stdout(String(i).padStart(99, '.') + '\\n');",
        "process.exitCode = 3;",
      ].join("\n"),
    );
    const child = Bun.spawn([BUN, script], { stdout: "pipe", stderr: "pipe" });
    const [out, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    expect(code).toBe(3);
    const lines = out.split("\n").filter(Boolean);
    expect(lines.length).toBe(40000);
    expect(lines.every((line, i) => line === `${i}`.padStart(99, "."))).toBe(true);
  });
});
