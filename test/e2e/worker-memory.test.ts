/**
 * Issue 18: code in a session read its own worker's memory (`/proc/<worker>/mem`, where the
 * resume credential lives) and environment: the kernel runs as the worker's uid in the same
 * sandbox. The worker now makes itself non-dumpable before it reads its credential. Tried
 * from inside a session, through the built binary on the local backend, with a root daemon
 * and with an unprivileged one.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";

const TIMEOUT_MS = 90_000;
const isRoot = process.geteuid?.() === 0;
const daemons: Daemon[] = [];

afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
});

async function startSession(d: Daemon): Promise<string> {
  const r = await d.cli("session", "start");
  if (r.code !== 0) throw new Error(`session start failed (${r.code}): ${r.stderr}\n${d.log()}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
  const w = await d.cli("wait", id, "--until", "READY", "--timeout", "45s");
  if (w.code !== 0) throw new Error(`wait READY failed: ${w.stdout}${w.stderr}\n${d.log()}`);
  return id;
}

/** Finds every worker the cell can see and tries to read its environment and its memory. */
const ATTACK = `
import json, os
found = {}
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        cmd = open(f'/proc/{pid}/cmdline', 'rb').read()
    except OSError:
        continue
    argv = cmd.split(b'\\0')
    # The worker itself, not the sandbox's launcher whose argv also names the directory.
    if b'--credential-dir' not in argv or os.path.basename(argv[0]) == b'bwrap':
        continue
    tries = {}
    for name in ('environ', 'mem', 'maps'):
        try:
            with open(f'/proc/{pid}/{name}', 'rb') as f:
                if name == 'mem':
                    start = int(open(f'/proc/{pid}/maps').readline().split('-')[0], 16)
                    f.seek(start)
                f.read(16)
            tries[name] = 'READ'
        except OSError as e:
            tries[name] = type(e).__name__
    found[pid] = tries
print(json.dumps(found))
`;

const MODES: readonly (readonly [string, number | undefined])[] = isRoot
  ? [
      ["a root daemon", undefined],
      ["an unprivileged daemon", 4242],
    ]
  : [["an unprivileged daemon", undefined]];

describe("a session's code cannot read its worker's memory (binary, local)", () => {
  test.each(MODES)(
    "%s: /proc/<worker>/environ, mem and maps are refused",
    async (_label, daemonUid) => {
      ensureBuilt();
      const env = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/nonexistent" };
      const d = await startDaemon(daemonUid === undefined ? { env } : { env, daemonUid });
      daemons.push(d);
      const id = await startSession(d);
      const r = await d.cli("exec", id, ATTACK, "--json");
      const body = JSON.parse(r.stdout) as { status: string; output: string };
      expect(body.status).toBe("OK");
      const found = JSON.parse(body.output.trim().split("\n").at(-1) ?? "{}") as Record<
        string,
        Record<string, string>
      >;
      // The worker is in the sandbox with the kernel: the attack must have found it.
      expect(Object.keys(found).length).toBeGreaterThan(0);
      for (const tries of Object.values(found)) {
        expect(tries).toEqual({
          environ: "PermissionError",
          mem: "PermissionError",
          maps: "PermissionError",
        });
      }
    },
    TIMEOUT_MS,
  );
});
