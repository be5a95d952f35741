/**
 * Issue 18: after another user swapped the spool (or a directory in it) for a symbolic link,
 * a root daemon created workload dirs and chowned a workspace where that user pointed. The
 * start-up check now refuses such a spool; this is the second wall, tried through the
 * compiled binary with jobs running: whatever is swapped under a live daemon, nothing is
 * created, chowned or chmodded where the link points, the submission waits instead of
 * failing, and it runs once the spool is whole again.
 */
import { afterEach, describe, expect, test } from "bun:test";
import {
  chownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const NOBODY = 65534;
const isRoot = process.geteuid?.() === 0;
const daemons: Daemon[] = [];

afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
});

/** Every path under `root`, itself included, with its owner and mode: what a chown changes. */
function ownersAndModes(root: string): string {
  const lines: string[] = [];
  const walk = (path: string) => {
    const s = lstatSync(path);
    lines.push(`${path} ${s.uid}:${s.gid} ${(s.mode & 0o7777).toString(8)}`);
    if (s.isDirectory()) for (const name of readdirSync(path).sort()) walk(join(path, name));
  };
  walk(root);
  return lines.join("\n");
}

async function submit(d: Daemon, ...command: string[]): Promise<string> {
  const r = await d.cli("submit", "--", ...command);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stdout}${r.stderr}`);
  return r.stdout.trim().split(/\s+/).at(-1) ?? "";
}

async function phaseOf(d: Daemon, id: string): Promise<string> {
  return (await d.show(id)).phase;
}

/** Swaps `path` for a link to `target`; the returned function puts it back. */
function swapForLink(path: string, target: string): () => void {
  const aside = `${path}.real`;
  renameSync(path, aside);
  symlinkSync(target, path);
  return () => {
    rmSync(path);
    renameSync(aside, path);
  };
}

const MODES: readonly (readonly [string, number | undefined])[] = isRoot
  ? [
      ["a root daemon", undefined],
      ["an unprivileged daemon", NOBODY],
    ]
  : [["an unprivileged daemon", undefined]];

describe("a spool swapped for links under a live daemon (binary)", () => {
  test.each(MODES)(
    "%s creates, chowns and chmods nothing where the links point",
    async (_label, daemonUid) => {
      ensureBuilt();
      const d = await startDaemon(
        daemonUid === undefined ? { gateway: false } : { gateway: false, daemonUid },
      );
      daemons.push(d);
      const spool = `${d.stateDir}-spool`;
      // Where the links point: the daemon's own to write, so only the walk can keep it out.
      const outside = join(d.dir, "outside");
      mkdirSync(outside, { mode: 0o755 });
      if (daemonUid !== undefined) chownSync(outside, daemonUid, daemonUid);
      const before = ownersAndModes(outside);

      const running = await submit(d, "sleep", "120");
      await eventually(async () => (await phaseOf(d, running)) === "RUNNING", {
        what: "the first job running",
      });

      for (const swapped of [join(spool, "workloads"), spool]) {
        const restore = swapForLink(swapped, outside);
        const failuresBefore = d.log().split("refusing to follow").length;
        const waiting = await submit(d, "sh", "-c", "echo made-it > out");
        // Refused, or (the bug) gone through the link: whichever comes first is judged below.
        const refused = () => d.log().split("refusing to follow").length > failuresBefore;
        await eventually(() => refused() || ownersAndModes(outside) !== before, {
          what: `the daemon refusing the link at ${swapped}`,
        });
        expect(ownersAndModes(outside)).toBe(before);
        expect(await phaseOf(d, waiting)).not.toBe("FAILED");
        restore();
        await eventually(async () => (await phaseOf(d, waiting)) === "COMPLETED", {
          what: `the waiting job completing once ${swapped} is whole`,
          timeoutMs: 30_000,
        });
      }
      expect(ownersAndModes(outside)).toBe(before);
      expect(await phaseOf(d, running)).toBe("RUNNING");
      await d.cli("cancel", running);
    },
    120_000,
  );
});
