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
