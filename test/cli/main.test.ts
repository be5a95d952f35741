import { describe, expect, test } from "bun:test";
import type { CommandIo } from "../../src/lib/command/command.ts";
import { VERSION } from "../../src/lib/version.ts";
import { main } from "../../src/main.ts";

function captureIo(): CommandIo & { out: () => string; err: () => string } {
  let out = "";
  let err = "";
  return {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    env: {},
    out: () => out,
    err: () => err,
  };
}

describe("main dispatch", () => {
  test("--version prints the package version and exits 0", async () => {
    const io = captureIo();
    expect(await main("/usr/local/bin/openai4s", ["--version"], io)).toBe(0);
    expect(io.out()).toBe(`openai4s ${VERSION}\n`);
  });

  test("--help lists every visible command and exits 0", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["--help"], io)).toBe(0);
    for (const name of ["serve", "submit", "list", "show", "cancel", "wait", "check-config"]) {
      expect(io.out()).toContain(`  ${name} `);
    }
    expect(io.out()).not.toContain("__supervise");
  });

  test("no subcommand at all is a usage error: help on stderr, exit 2", async () => {
    const io = captureIo();
    expect(await main("openai4s", [], io)).toBe(2);
    expect(io.err()).toContain("Commands:");
    expect(io.out()).toBe("");
  });

  test("an explicit empty --state-dir is a usage error, not the default dir", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["serve", "--state-dir", ""], io)).toBe(2);
    expect(io.err()).toContain("--state-dir must not be empty");
  });

  test("an unknown subcommand is a usage error: exit 2, named on stderr", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["frobnicate"], io)).toBe(2);
    expect(io.err()).toContain('unknown command "frobnicate"');
    expect(io.out()).toBe("");
  });

  test("invoked as openai4s-worker it is the worker, whatever the first argument", async () => {
    const io = captureIo();
    expect(await main("/opt/bin/openai4s-worker", ["--help"], io)).toBe(0);
    expect(io.out().toLowerCase()).toContain("worker");
    expect(io.out()).not.toContain("Commands:");
  });
});

describe("a user's habits", () => {
  test("a mistyped command gets one line naming the likely one, not the whole help", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["lsit"], io)).toBe(2);
    expect(io.err()).toBe(
      'openai4s: unknown command "lsit" (did you mean "list"?)\nRun `openai4s --help` for the list of commands.\n',
    );
  });

  test("client options before the command reach it (--token-file F profiles)", async () => {
    const io = captureIo();
    // The command runs and parses them: an unreadable token file is its own, named error.
    expect(
      await main("openai4s", ["--token-file", "/nonexistent/t", "--json", "profiles"], io),
    ).toBe(2);
    expect(io.err()).toContain("--token-file: cannot read /nonexistent/t");
    expect(io.err()).not.toContain("unknown command");
  });

  test("--server=ADDR before the command, too; a non-client option there is still refused", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["--server=unix:/nowhere.sock", "list"], io)).toBe(1);
    expect(io.err()).toContain("/nowhere.sock");
    const other = captureIo();
    expect(await main("openai4s", ["--state-dir", "x", "list"], other)).toBe(2);
    expect(other.err()).toContain('unknown command "--state-dir"');
  });

  test("a mistyped flag gets its likely meaning", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["submit", "--time-limt", "5", "--", "true"], io)).toBe(2);
    expect(io.err()).toContain('unknown option "--time-limt" (did you mean "--time-limit"?)');
  });
});
