/**
 * Output that cannot be written is lost output: the command exits 1 and says so in one
 * line. It used to exit 1 with a stack trace and a source listing.
 */
import { beforeAll, expect, test } from "bun:test";
import { BINARY, ensureBuilt } from "../support/binary.ts";

beforeAll(() => ensureBuilt(), 120_000);

async function sh(script: string) {
  const p = Bun.spawn(["bash", "-c", script], {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", BIN: BINARY },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  return { out, err, code };
}

test.each([["--version"], ["--help"], ["submit --help"]])(
  "`openai4s %s` into a full disk exits 1 with one line",
  async (args) => {
    const r = await sh(`"$BIN" ${args} >/dev/full`);
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      "openai4s: cannot write the output: ENOSPC: no space left on device, write\n",
    );
  },
);
