/**
 * A path that leaks into one allocation still cannot read another's files (issue 18): a root
 * daemon runs each workload as a uid of its own, so the kernel's permission check stands
 * behind the sandbox's namespaces. Shown where nothing else stands in the way: bubblewrap
 * made unavailable, so job B sees the host's paths and /proc, and is given job A's
 * workspace path and pid. Every way to A's 0600 file must be refused.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const IS_ROOT = process.getuid?.() === 0;

/** Tries each way to A's secret; prints one JSON line: path -> what it got. */
const READER = `
import json, os, sys
ws, pid = sys.argv[1], sys.argv[2]
paths = [
  os.path.join(ws, 'secret'),
  f'/proc/{pid}/cwd/secret',
  f'/proc/{pid}/root' + os.path.join(ws, 'secret'),
  f'/proc/{pid}/environ',
]
out = {}
for p in paths:
    try:
        with open(p) as f:
            out[p] = f.read()
    except OSError as e:
        out[p] = type(e).__name__
try:
    out['list'] = os.listdir(ws)
except OSError as e:
    out['list'] = type(e).__name__
out['uid'] = os.getuid()
print(json.dumps(out))
`;

async function submit(d: Daemon, ...command: string[]): Promise<string> {
  const r = await d.cli("submit", "--", ...command);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  return r.stdout.trim().split(/\s+/).at(-1) ?? "";
}

function spoolOf(d: Daemon, id: string): { workspace: string; allocations: string } {
  const w = join(`${d.stateDir}-spool`, "workloads", id);
  return { workspace: join(w, "workspace"), allocations: join(w, "allocations") };
}

describe.if(IS_ROOT)("a root daemon without a sandbox: one uid per workload", () => {
  let d: Daemon;

  beforeAll(async () => {
    ensureBuilt();
    d = await startDaemon({
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", OPENAI4S_BWRAP: "/nonexistent/bwrap" },
      gateway: false,
    });
  }, 120_000);

  afterAll(async () => {
    await d?.stop();
  });

  test("job B, given job A's paths and pid, reads none of A's files", async () => {
    const a = await submit(
      d,
      "sh",
      "-c",
      "umask 077; echo s3cret > secret; echo $$; exec sleep 60",
    );
    await d.cli("wait", a, "--until", "RUNNING", "--timeout", "30s");
    const aDirs = spoolOf(d, a);
    const allocation = (await d.show(a)).allocations[0]?.id ?? "";
    const aStdout = join(aDirs.allocations, allocation, "stdout.log");
    const pid = await eventually(
      () => {
        try {
          return readFileSync(aStdout, "utf8").trim() || null;
        } catch {
          return null;
        }
      },
      { what: "job A's pid", timeoutMs: 20_000 },
    );
    const aUid = statSync(aDirs.workspace).uid;
    expect(readFileSync(join(aDirs.workspace, "secret"), "utf8")).toBe("s3cret\n");
    expect(statSync(aDirs.workspace).mode & 0o777).toBe(0o700);

    const b = await submit(d, "python3", "-c", READER, aDirs.workspace, pid);
    expect((await d.cli("wait", b, "--timeout", "30s")).code).toBe(0);
    const report = JSON.parse((await d.cli("logs", b)).stdout.trim().split("\n").at(-1) ?? "{}");
    expect(report.uid).not.toBe(aUid);
    expect(report.uid).toBe(statSync(spoolOf(d, b).workspace).uid);
    for (const [path, got] of Object.entries(report)) {
      if (path === "uid") continue;
      expect({ path, got }).toEqual({ path, got: "PermissionError" });
    }
    await d.cli("cancel", a);
  }, 90_000);
});
