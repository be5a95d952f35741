/**
 * Docs that cannot rot: every README shell block marked `<!-- runnable -->` runs here, as a
 * user would run it after `npm ci && npm link` and `openai4s serve &`: the `openai4s` on
 * PATH is the package's own launcher (bin/openai4s.mjs, under the name npm links it as),
 * HOME is a fresh directory, nothing else is set but PATH and LANG, and the daemon listens
 * on the default state dir's socket. Every other block says why it is not run here
 * (`<!-- not-runnable: REASON -->`), so a new block cannot slip past unexecuted. A block may
 * start daemons of its own in the background: each runs in a process group of its own,
 * stopped when the block ends. `npm start` is run too: the client must find it, no flag.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { killProcessesMentioning } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const ROOT = join(import.meta.dir, "..", "..");
const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  readonly bin: Readonly<Record<string, string>>;
};

/** Every shell block and the marker line before it (null: none). */
export function shellBlocks(
  markdown: string,
): readonly { readonly marker: string | null; readonly body: string }[] {
  const out: { marker: string | null; body: string }[] = [];
  const pattern = /(?:(<!--[^\n]*-->)\s*\n)?```(?:sh|bash)\n([\s\S]*?)\n```/g;
  for (const match of markdown.matchAll(pattern)) {
    out.push({ marker: match[1] ?? null, body: match[2] ?? "" });
  }
  return out;
}

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

/** Pids whose process group is `pgid` (a block's, with whatever it left in the background). */
function processGroup(pgid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]?.split(" ");
      if (fields?.[0] !== "Z" && Number(fields?.[2]) === pgid) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/** Every process group a block or `npm start` ran in. */
const startedGroups = new Set<number>();

/** SIGTERM to the group (a daemon stops gracefully), then waits until it is empty. */
async function stopGroup(pgid: number): Promise<void> {
  try {
    process.kill(-pgid, "SIGTERM");
  } catch {
    return; // nothing left in it
  }
  const empty = await eventually(() => processGroup(pgid).length === 0, {
    timeoutMs: 15_000,
    intervalMs: 50,
  }).catch(() => false);
  if (!empty) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
}

/** Runs `argv` in a process group of its own, output to files; returns when `argv` exits. */
async function runInGroup(
  argv: readonly string[],
  options: { readonly cwd: string; readonly env: Record<string, string>; readonly logDir: string },
): Promise<{ code: number; out: string; err: string; pgid: number }> {
  const outPath = join(options.logDir, "out");
  const errPath = join(options.logDir, "err");
  const proc = Bun.spawn([...argv], {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdin: "ignore",
    // Files, not pipes: a daemon the block leaves in the background would hold a pipe open.
    stdout: Bun.file(outPath),
    stderr: Bun.file(errPath),
  });
  // A block that times out is never stopped by its test: afterAll stops what is left.
  startedGroups.add(proc.pid);
  const code = await proc.exited;
  return {
    code,
    out: readFileSync(outPath, "utf8"),
    err: readFileSync(errPath, "utf8"),
    pgid: proc.pid,
  };
}

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
  for (const pgid of startedGroups) await stopGroup(pgid);
  // A block that failed half-way may have left a session's worker running.
  killProcessesMentioning(home);
  removeDir(home);
});

describe("README", () => {
  const blocks = runnableBlocks(readFileSync(join(ROOT, "README.md"), "utf8"));

  test("has runnable blocks (a marker typo must not make this suite vacuous)", () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
  });

  test("every other shell block says why it is not run here", () => {
    const all = shellBlocks(readFileSync(join(ROOT, "README.md"), "utf8"));
    const unexplained = all.filter(
      (b) =>
        b.marker !== "<!-- runnable -->" && !/^<!-- not-runnable: \S.* -->$/.test(b.marker ?? ""),
    );
    expect(unexplained.map((b) => b.body.split("\n")[0])).toEqual([]);
    expect(blocks.length).toBe(all.filter((b) => b.marker === "<!-- runnable -->").length);
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
      const logDir = join(home, `.block-${i + 1}`);
      mkdirSync(logDir);
      const { code, out, err, pgid } = await runInGroup(["bash", "-euo", "pipefail", "-c", block], {
        cwd: home,
        env: env(),
        logDir,
      });
      await stopGroup(pgid);
      startedGroups.delete(pgid);
      if (code !== 0) {
        throw new Error(
          `block exited ${code}\n--- stdout\n${out}\n--- stderr\n${err}\n--- daemon\n${daemonLog}`,
        );
      }
      expect(code).toBe(0);
    }, 90_000);
  });
});

describe("npm start", () => {
  test("starts the daemon where the client looks: `openai4s profiles` works with no flag", async () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(readme).toContain("npm ci && npm start");
    const startHome = makeTempDir("o4s-npm-start-");
    const startEnv = { ...env(), HOME: startHome };
    const npm = Bun.spawn(["npm", "start"], {
      cwd: ROOT,
      env: startEnv,
      detached: true,
      stdin: "ignore",
      stdout: "ignore",
      stderr: "ignore",
    });
    startedGroups.add(npm.pid);
    try {
      const met = await eventually(
        async () => {
          const r = await runInGroup(["openai4s", "profiles"], {
            cwd: startHome,
            env: startEnv,
            logDir: startHome,
          });
          return r.code === 0 && r.out.includes("default");
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      ).catch(() => false);
      expect(met).toBe(true);
    } finally {
      await stopGroup(npm.pid);
      startedGroups.delete(npm.pid);
      removeDir(startHome);
    }
  }, 60_000);
});
