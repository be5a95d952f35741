/**
 * Docs that cannot rot: every README shell block marked `<!-- runnable -->` runs here, as a
 * user would run it after `npm ci && npm link` and `openai4s serve &`: the `openai4s` on
 * PATH is the package's own launcher (bin/openai4s.mjs, under the name npm links it as),
 * HOME is a fresh directory, and the daemon listens on the default state dir's socket.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "../support/eventually.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const ROOT = join(import.meta.dir, "..", "..");
const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  readonly bin: Readonly<Record<string, string>>;
};

/** The shell blocks that follow a `<!-- runnable -->` line (blank lines may sit between). */
export function runnableBlocks(markdown: string): readonly string[] {
  const blocks: string[] = [];
  const pattern = /<!-- runnable -->\s*\n```(?:sh|bash)\n([\s\S]*?)\n```/g;
  for (const match of markdown.matchAll(pattern)) blocks.push(match[1] ?? "");
  return blocks;
}

describe("runnableBlocks", () => {
  test("finds marked blocks only", () => {
    const md = "```sh\nno\n```\n<!-- runnable -->\n\n```sh\nyes 1\nyes 2\n```\n";
    expect(runnableBlocks(md)).toEqual(["yes 1\nyes 2"]);
  });
});

let home: string;
let binDir: string;
let daemon: ReturnType<typeof Bun.spawn> | null = null;
let daemonLog = "";
const env = () => ({
  PATH: `${binDir}:${process.env["PATH"] ?? "/usr/bin:/bin"}`,
  HOME: home,
  LANG: "C.UTF-8",
});

beforeAll(async () => {
  home = makeTempDir("o4s-readme-");
  binDir = join(home, "npm-bin");
  mkdirSync(binDir);
  // What `npm link` creates: a symlink per bin entry, named after the entry.
  for (const [name, target] of Object.entries(PACKAGE.bin)) {
    symlinkSync(join(ROOT, target), join(binDir, name));
  }
  const started = Bun.spawn(["openai4s", "serve"], {
    cwd: home,
    env: env(),
    stdout: "pipe",
    stderr: "pipe",
  });
  daemon = started;
  (async () => {
    for await (const chunk of started.stderr) {
      daemonLog += new TextDecoder().decode(chunk);
    }
  })();
  const socket = join(home, ".local", "state", "openai4s", "api.sock");
  const listening = await eventually(() => existsSync(socket), {
    timeoutMs: 30_000,
    intervalMs: 100,
  }).catch(() => false);
  if (!listening) throw new Error(`daemon did not start\n${daemonLog}`);
}, 60_000);

afterAll(async () => {
  if (daemon) {
    daemon.kill("SIGTERM");
    await daemon.exited;
  }
  removeDir(home);
});

describe("README", () => {
  const blocks = runnableBlocks(readFileSync(join(ROOT, "README.md"), "utf8"));

  test("has runnable blocks (a marker typo must not make this suite vacuous)", () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
  });

  test("package.json bin entries exist and are executable launchers", () => {
    expect(Object.keys(PACKAGE.bin).sort()).toEqual(["openai4s", "openai4s-worker"]);
    for (const target of Object.values(PACKAGE.bin)) {
      expect(readFileSync(join(ROOT, target), "utf8").startsWith("#!/usr/bin/env node\n")).toBe(
        true,
      );
    }
  });

  blocks.forEach((block, i) => {
    test(`runnable block ${i + 1} exits 0: ${block.split("\n")[0]}`, async () => {
      const proc = Bun.spawn(["bash", "-euo", "pipefail", "-c", block], {
        cwd: home,
        env: env(),
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([
        new Response(proc.stdout).text(),
        new Response(proc.stderr).text(),
        proc.exited,
      ]);
      if (code !== 0) {
        throw new Error(
          `block exited ${code}\n--- stdout\n${out}\n--- stderr\n${err}\n--- daemon\n${daemonLog}`,
        );
      }
      expect(code).toBe(0);
    }, 90_000);
  });
});
