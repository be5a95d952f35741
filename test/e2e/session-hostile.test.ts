/**
 * Hostile acceptance checks on sessions and per-allocation isolation, through the built
 * binary on the local backend with bubblewrap and the worker gateway on:
 *  - a cell that forks must not leave its child serving the kernel's protocol (the child
 *    would answer the cell, the parent would hang in it, and later cells would run in a copy);
 *  - with the gateway on, BATCH jobs run sandboxed, and a bare command found first in a
 *    PATH directory of shims (pyenv) that cannot work inside the sandbox must still run;
 *  - code in a session or in a BATCH job sees no other allocation, no daemon state, no
 *    capability;
 *  - a daemon restarted without the gateway does not go on reporting its sessions READY.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BINARY,
  condition,
  type Daemon,
  ensureBuilt,
  startDaemon,
  type WorkloadView,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const TIMEOUT_MS = 60_000;

async function startSession(d: Daemon): Promise<string> {
  const r = await d.cli("session", "start");
  if (r.code !== 0) throw new Error(`session start failed (${r.code}): ${r.stderr}\n${d.log()}`);
  const id = r.stdout.trim().split(/\s+/).at(-1);
  if (!id) throw new Error(`no id in ${JSON.stringify(r.stdout)}`);
  const w = await d.cli("wait", id, "--until", "READY", "--timeout", "30s");
  if (w.code !== 0) throw new Error(`wait READY failed: ${w.stdout}${w.stderr}\n${d.log()}`);
  return id;
}

async function exec(
  d: Daemon,
  id: string,
  code: string,
): Promise<{ status: string; output: string; error: string | null }> {
  const r = await d.cli("exec", id, code, "--json");
  if (r.code !== 0 && !(r.code === 1 && r.stdout.includes('"status"'))) {
    throw new Error(`exec failed (${r.code}): ${r.stdout}${r.stderr}`);
  }
  return JSON.parse(r.stdout);
}

async function submitAndWait(d: Daemon, ...command: string[]): Promise<string> {
  const r = await d.cli("submit", "--", ...command);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
  await d.cli("wait", id, "--timeout", "30s");
  return id;
}

let d: Daemon;
let shimRoot: string;

beforeAll(async () => {
  ensureBuilt();
  // A pyenv-like shim first on PATH: outside the sandbox it works, inside it cannot, because
  // what it execs lives in a directory the sandbox does not bind.
  shimRoot = makeTempDir("o4s-shim-");
  mkdirSync(join(shimRoot, "shims"));
  mkdirSync(join(shimRoot, "libexec"));
  writeFileSync(join(shimRoot, "libexec", "real"), '#!/bin/sh\nexec /usr/bin/python3 "$@"\n');
  chmodSync(join(shimRoot, "libexec", "real"), 0o755);
  writeFileSync(
    join(shimRoot, "shims", "python3"),
    `#!/bin/sh\nexec "${join(shimRoot, "libexec", "real")}" "$@"\n`,
  );
  chmodSync(join(shimRoot, "shims", "python3"), 0o755);
  d = await startDaemon({
    env: { PATH: `${join(shimRoot, "shims")}:/usr/local/bin:/usr/bin:/bin` },
  });
}, 120_000);

afterAll(async () => {
  await d?.stop();
  removeDir(shimRoot);
});

describe("hostile cells", () => {
  test(
    "a cell that forks answers from the parent, and the kernel stays the same process",
    async () => {
      const id = await startSession(d);
      const before = await exec(d, id, "import os; x = 1; os.getpid()");
      const forked = await exec(
        d,
        id,
        [
          "import os",
          "pid = os.fork()",
          "if pid == 0:",
          "    print('child')",
          "else:",
          "    os.waitpid(pid, 0)",
          "    print('parent')",
        ].join("\n"),
      );
      expect(forked.status).toBe("OK");
      expect(forked.output.trim()).toBe("parent");
      const after = await exec(d, id, "x += 1; (os.getpid(), x)");
      expect(after.output.trim()).toBe(`(${before.output.trim()}, 2)`);
    },
    TIMEOUT_MS,
  );
});

describe("isolation of BATCH jobs when the gateway is on", () => {
  test(
    "a bare `python3` whose first PATH hit is an unusable shim still runs, sandboxed",
    async () => {
      const session = await startSession(d);
      const sessionDir = join(`${d.stateDir}-spool`, "workloads", session);
      const probe = [
        "import os",
        `names = ['${sessionDir}', '${join(d.stateDir, "signing-key")}', '${join(d.stateDir, "admin-token")}', '${join(d.stateDir, "openai4s.db")}', '${d.socket}']`,
        "print(sum(os.path.exists(n) for n in names))",
        "print(len([p for p in os.listdir('/proc') if p.isdigit()]) < 10)",
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])",
      ].join("\n");
      const id = await submitAndWait(d, "python3", "-c", probe);
      const view = await d.show(id);
      const allocation = view.allocations[0];
      const stdout = allocation
        ? readFileSync(
            join(
              `${d.stateDir}-spool`,
              "workloads",
              id,
              "allocations",
              allocation.id,
              "stdout.log",
            ),
            "utf8",
          )
        : "";
      expect({ phase: view.phase, stdout }).toEqual({
        phase: "COMPLETED",
        stdout: "0\nTrue\n0000000000000000\n",
      });
    },
    TIMEOUT_MS,
  );
});

describe("a daemon restarted without the worker gateway", () => {
  test(
    "says nothing is READY: no worker can connect, and nobody observes the sessions",
    async () => {
      const first = await startDaemon({});
      const second: { proc: ReturnType<typeof Bun.spawn> | null } = { proc: null };
      try {
        const live = await startSession(first);
        first.proc.kill("SIGTERM");
        await first.proc.exited;
        second.proc = Bun.spawn([BINARY, "serve", "--state-dir", first.stateDir], {
          env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: first.dir },
          stdin: "ignore",
          stdout: "ignore",
          stderr: "ignore",
        });
        const cli = async (...args: string[]) => {
          const p = Bun.spawn([BINARY, ...args], {
            env: {
              PATH: process.env["PATH"] ?? "/usr/bin:/bin",
              OPENAI4S_SERVER: `unix:${first.socket}`,
            },
            stdout: "pipe",
            stderr: "ignore",
          });
          const [stdout, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
          return { code, stdout };
        };
        const shown = await eventually(
          async () => {
            const r = await cli("show", live, "--json");
            return r.code === 0 ? (JSON.parse(r.stdout) as WorkloadView) : null;
          },
          { what: "the restarted daemon to answer" },
        );
        // SCHEDULED says the allocation got its resources, which it did; every readiness
        // condition must be down.
        const open = shown.conditions
          .filter((c) => c.type !== "SCHEDULED" && c.status === "TRUE")
          .map((c) => c.type);
        expect(open).toEqual([]);
        expect(condition(shown, "READY")?.message ?? "").toContain("gateway");
      } finally {
        second.proc?.kill("SIGTERM");
        await second.proc?.exited;
        await first.stop();
      }
    },
    TIMEOUT_MS,
  );
});

describe("the idle clock", () => {
  test(
    "a cell still running is a present user: the session is not reclaimed under it",
    async () => {
      const idle = await startDaemon({ env: { OPENAI4S_SESSION_IDLE_TIMEOUT_SECONDS: "2" } });
      try {
        const id = await startSession(idle);
        const ran = await exec(idle, id, "import time; time.sleep(5); 'done'");
        expect(ran).toMatchObject({ status: "OK", output: "'done'", error: null });
        expect((await idle.show(id)).phase).toBe("RUNNING");
        // And once nothing runs, it is idle again: reclaimed with the reason that says so.
        const ended = await eventually(
          async () => {
            const w = await idle.show(id);
            return w.phase === "CANCELLED" ? w : null;
          },
          { what: "the idle session to be reclaimed" },
        );
        expect(ended.reason).toBe("IDLE_TIMEOUT");
      } finally {
        await idle.stop();
      }
    },
    TIMEOUT_MS,
  );
});
