/**
 * Temp dirs that are always removed. A full `npm test` must leave nothing in the temp dir
 * (.ci/run runs the suite with TMPDIR set to a fresh directory and fails on any leftover):
 * dozens of `o4s-*` directories a run used to leave behind filled the machines' /tmp, and a
 * leftover state dir from one run could be picked up by the next.
 *
 * Three shapes:
 *  - `tempDirs(prefix)` at file or describe level: a maker whose directories are removed by
 *    an afterEach/afterAll hook registered where it is called (hooks run in the order they
 *    are registered: call it after the hook that stops what writes into its dirs);
 *  - `using dir = tempDir(prefix)` inside one block: removed when the block ends, thrown
 *    assertions included;
 *  - `makeTempDir`/`removeDir` for a dir whose life a beforeAll/afterAll pair or a harness's
 *    close() already owns (it removes the dir after stopping the daemon that writes there).
 */
import { afterAll, afterEach } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Makes a fresh empty directory under the temp dir (TMPDIR honoured); the caller removes it. */
export function makeTempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeDir(path: string): void {
  stopSupervisorsUnder(path);
  rmSync(path, { recursive: true, force: true });
}

const SUPERVISORS_GONE_MS = 10_000;

/**
 * Local jobs outlive a stopped daemon (by design), and so do their supervisors
 * (`openai4s __supervise --job-dir DIR/...`). One that was still starting when its test
 * removed DIR made its log directory again (mkdir -p) and the suite left a tree behind: a CI
 * run failed on an `o4s-backup-*` leftover. They are stopped first (SIGTERM: the job is
 * ended and its record written while DIR still exists), then waited for, bounded.
 */
function stopSupervisorsUnder(path: string): void {
  let pids = supervisorsUnder(path);
  for (const pid of pids) signal(pid, "SIGTERM");
  const deadline = Date.now() + SUPERVISORS_GONE_MS;
  while (pids.length > 0 && Date.now() < deadline) {
    Bun.sleepSync(20);
    pids = supervisorsUnder(path);
  }
  for (const pid of pids) signal(pid, "SIGKILL");
}

function supervisorsUnder(path: string): number[] {
  const inside = `${path}/`;
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      // A zombie has an empty cmdline: it writes nothing more.
    } catch {
      continue; // gone meanwhile
    }
    if (argv.includes("__supervise") && argv.some((a) => a.startsWith(inside))) {
      found.push(Number(name));
    }
  }
  return found;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}

/**
 * A maker of fresh directories, all removed after each test (`"each"`) or once the enclosing
 * file or describe block has run (`"all"`, the default). Call it at file or describe level:
 * that is where its hook is registered.
 */
export function tempDirs(prefix: string, removeAfter: "each" | "all" = "all"): () => string {
  const made: string[] = [];
  const removeMade = () => {
    for (const dir of made.splice(0)) removeDir(dir);
  };
  if (removeAfter === "each") afterEach(removeMade);
  else afterAll(removeMade);
  return () => {
    const dir = makeTempDir(prefix);
    made.push(dir);
    return dir;
  };
}

export interface TempDir extends Disposable {
  readonly path: string;
}

/** One directory for one block: `using dir = tempDir("o4s-x-")`; gone when the block ends. */
export function tempDir(prefix: string): TempDir {
  const path = makeTempDir(prefix);
  return {
    path,
    [Symbol.dispose]() {
      removeDir(path);
    },
  };
}
