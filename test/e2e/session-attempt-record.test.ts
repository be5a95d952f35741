/**
 * Files the daemon parses are out of every allocation's reach, and hostile contents cost a
 * log line, not the daemon (issue 8: `{"ranks": 20000000}` in a session's attempt record
 * cost 0.7-2.5 GB of RSS and 100 % CPU at the next start). Through the built binary.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SESSION_ATTEMPT_FILE } from "../../src/adapters/spool/session-preparer.ts";
import { stateLayout } from "../../src/core/layout.ts";
import {
  BINARY,
  type Daemon,
  ensureBuilt,
  freePort,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 120_000;
let d: Daemon;

beforeAll(async () => {
  ensureBuilt();
  d = await startDaemon({});
}, 120_000);
afterAll(async () => {
  await d?.stop();
});

async function startSession(): Promise<string> {
  const r = await d.cli("session", "start");
  if (r.code !== 0) throw new Error(`session start failed: ${r.stderr}\n${d.log()}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
  const w = await d.cli("wait", id, "--until", "READY", "--timeout", "30s");
  if (w.code !== 0) throw new Error(`not READY: ${w.stdout}${w.stderr}\n${d.log()}`);
  return id;
}

function rssKb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"));
  return Number(line?.split(/\s+/)[1] ?? Number.NaN);
}

/** Restarts a daemon on the same state dir (gateway on), returns it with its log. */
async function restart(stateDir: string) {
  const logPath = join(stateDir, "..", `restart-${Date.now()}.log`);
  const proc = Bun.spawn([BINARY, "serve", "--state-dir", stateDir], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: process.env["HOME"] ?? "/root",
      OPENAI4S_WORKER_LISTEN: `127.0.0.1:${await freePort()}`,
    },
    stdin: "ignore",
    stdout: Bun.file(logPath),
    stderr: Bun.file(logPath),
  });
  const socket = join(stateDir, "api.sock");
  await eventually(
    async () => {
      try {
        const res = await fetch("http://localhost/healthz", { unix: socket });
        return res.ok ? true : null;
      } catch {
        return null;
      }
    },
    { what: "the restarted daemon to answer /healthz" },
  );
  return { proc, log: () => readFileSync(logPath, "utf8"), socket };
}

describe("the session attempt record", () => {
  test(
    "is out of the session's reach, and hostile contents leave the daemon healthy and flat",
    async () => {
      const id = await startSession();
      const layout = stateLayout(d.stateDir);
      const [allocationId] = readdirSync(join(layout.workloadDir(id), "allocations"));
      if (allocationId === undefined) throw new Error("no allocation");
      const privateRecord = join(layout.attemptRecordDir(id, allocationId), SESSION_ATTEMPT_FILE);
      const original = readFileSync(privateRecord, "utf8");

      // From inside the session: the private record is not even visible; a file planted in
      // the allocation dir (where the record once was; no longer even bound into the
      // sandbox) would be one the daemon never reads.
      const code = [
        "import os, json",
        `p = ${JSON.stringify(privateRecord)}`,
        "seen = os.path.exists(p)",
        "try:\n    open(p, 'w').write(json.dumps({'ranks': 20000000})); wrote = True\nexcept Exception:\n    wrote = False",
        `q = ${JSON.stringify(join(layout.allocationDir(id, allocationId), SESSION_ATTEMPT_FILE))}`,
        "try:\n    open(q, 'w').write(json.dumps({'ranks': 20000000}))\nexcept OSError:\n    pass",
        "(seen, wrote)",
      ].join("\n");
      const r = await d.cli("exec", id, code, "--json");
      expect(JSON.parse(r.stdout)).toMatchObject({ status: "OK", output: "(False, False)" });
      expect(readFileSync(privateRecord, "utf8")).toBe(original);

      // Worse than any session can do: the host rewrites the private record itself, between
      // daemon runs (the session's worker keeps running; d.stop() in afterAll cleans up).
      d.proc.kill("SIGTERM");
      await d.proc.exited;
      for (const hostile of ['{"ranks": 20000000}', "9007199254740991", null]) {
        if (hostile === null) {
          writeFileSync(privateRecord, '{"ranks":1');
          truncateSync(privateRecord, 1024 * 1024 * 1024); // 1 GB, sparse
        } else {
          writeFileSync(privateRecord, hostile);
        }
        const again = await restart(d.stateDir);
        try {
          await eventually(
            async () => (again.log().includes("session attempt record refused") ? true : null),
            { what: `the refusal in the log: ${again.log()}` },
          );
          // Healthy, and flat: a bounded read, no array sized by the record.
          const health = await fetch("http://localhost/healthz", { unix: again.socket });
          expect(health.status).toBe(200);
          expect(rssKb(again.proc.pid)).toBeLessThan(400 * 1024);
          // Logged once, not every readiness pass.
          await eventually(
            async () => {
              const res = await fetch(`http://localhost/v1/workloads/${id}`, {
                unix: again.socket,
              });
              return res.ok ? true : null;
            },
            { what: "two more readiness passes" },
          );
          const lines = again
            .log()
            .split("\n")
            .filter((l) => l.includes("attempt record refused"));
          expect(lines).toHaveLength(1);
        } catch (error) {
          throw new Error(`${String(error)}\n${again.log()}`);
        } finally {
          again.proc.kill("SIGTERM");
          await again.proc.exited;
        }
      }
    },
    TIMEOUT_MS * 2,
  );
});
