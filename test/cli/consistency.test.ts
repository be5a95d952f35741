/**
 * The CLI speaks with one voice: `openai4s COMMAND: message` for every usage error, the
 * same message for `--flag value` and `--flag=value` (negative values included), balanced
 * quotes, and an unreachable unix socket explained as "no daemon is running there".
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { main } from "../../src/main.ts";
import { captureIo } from "../support/cli-runtime.ts";
import { tempDir } from "../support/temp-dir.ts";

async function run(args: readonly string[], env: Record<string, string> = {}) {
  const io = captureIo(env);
  const code = await main("openai4s", args, io);
  return { code, err: io.err(), out: io.out() };
}

describe("usage errors", () => {
  const cases: readonly [string, readonly string[], readonly string[], string][] = [
    [
      "duration",
      ["submit", "--time-limit", "-5m", "--", "true"],
      ["submit", "--time-limit=-5m", "--", "true"],
      `openai4s submit: --time-limit "-5m" is not a duration (minutes when bare, as for a scheduler's --time (90), 90s, 15m, 2h, 1d, 1h30m, MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS)`,
    ],
    [
      "number",
      ["logs", "w-1", "--tail", "-3"],
      ["logs", "w-1", "--tail=-3"],
      'openai4s logs: --tail "-3" is not a whole number from 0 to 1000000',
    ],
    [
      "attempts",
      ["submit", "--max-attempts", "-1", "--", "x"],
      ["submit", "--max-attempts=-1", "--", "x"],
      'openai4s submit: --max-attempts "-1" is not a number from 1 to 10',
    ],
    [
      "wait timeout",
      ["wait", "w-1", "--timeout", "-5m"],
      ["wait", "w-1", "--timeout=-5m"],
      'openai4s wait: --timeout "-5m" is not a duration',
    ],
  ];
  for (const [what, spaced, joined, message] of cases) {
    test(`${what}: --flag value and --flag=value give the same message naming the flag`, async () => {
      const a = await run(spaced);
      const b = await run(joined);
      expect(a.code).toBe(2);
      expect(b.code).toBe(2);
      expect(a.err).toContain(message);
      expect(a.err).toBe(b.err);
    });
  }

  test("an unknown flag is named in balanced double quotes", async () => {
    for (const command of ["submit", "list", "serve", "check-config", "logs"]) {
      const { code, err } = await run([command, "--frobnicate"]);
      expect(code).toBe(2);
      const first = err.split("\n")[0] ?? "";
      expect(first).toStartWith(`openai4s ${command}: unknown option "--frobnicate"`);
      expect(first.split('"').length % 2).toBe(1);
      expect(first).not.toContain("'");
    }
  });

  test("every usage error starts with openai4s COMMAND:, never openai4s: COMMAND:", async () => {
    for (const args of [
      ["submit"],
      ["show"],
      ["list", "--server", "unix:"],
      ["serve", "--log-level", "loud"],
      ["logs"],
    ]) {
      const { code, err } = await run(args);
      expect(code).toBe(2);
      expect(err).toStartWith(`openai4s ${args[0]}: `);
      expect(err).not.toContain(`openai4s: ${args[0]}`);
    }
  });

  test("a flag that needs a value and got another flag says so", async () => {
    const { code, err } = await run(["submit", "--profile", "--json", "--", "true"]);
    expect(code).toBe(2);
    expect(err).toContain("openai4s submit: --profile needs a value");
  });
});

describe("unreachable daemon", () => {
  test("a unix socket with nothing behind it: no daemon is running there, and how to point", async () => {
    using scratch = tempDir("o4s-nosock-");
    const dir = scratch.path;
    const socket = join(dir, "api.sock");
    const { code, err } = await run(["list"], { OPENAI4S_SERVER: `unix:${socket}` });
    expect(code).toBe(1);
    expect(err).toContain(`openai4s list: no daemon is running at unix:${socket}`);
    expect(err).toContain("--server unix:PATH");
    expect(err).not.toContain("typo");
  });
});
