/**
 * One daemon per state directory. Two reconcilers over one database would each submit and
 * supervise the same workloads; the socket check alone does not catch a second daemon that
 * listens only on TCP (or on another socket path).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type RunningDaemon, startDaemon } from "../../src/apps/daemon/daemon.ts";
import { BINARY, ensureBuilt } from "../support/binary.ts";
import { localDaemonConfig } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { tempDirs } from "../support/temp-dir.ts";

const daemons: RunningDaemon[] = [];
const processes: ReturnType<typeof Bun.spawn>[] = [];
afterEach(async () => {
  for (const p of processes.splice(0)) p.kill("SIGKILL");
  for (const d of daemons.splice(0)) await d.stop();
});
// After the daemons' hook: hooks run in order, and a daemon still running writes into its dir.
const tempDir = tempDirs("o4s-lock-", "each");

const config = localDaemonConfig;

function tempState(): string {
  const root = tempDir();
  return join(root, "state");
}

async function healthy(socket: string): Promise<boolean> {
  try {
    const res = await fetch("http://localhost/healthz", { unix: socket });
    return res.status === 200;
  } catch {
    return false;
  }
}

describe("one daemon per state dir", () => {
  test("a second daemon listening only on TCP is refused, and the first keeps serving", async () => {
    const stateDir = tempState();
    const first = await startDaemon(config(stateDir));
    expect(first.kind).toBe("Started");
    if (first.kind === "Started") daemons.push(first.daemon);
    const second = await startDaemon(
      config(stateDir, { listen: [{ kind: "tcp", host: "127.0.0.1", port: 0 }] }),
    );
    if (second.kind === "Started") daemons.push(second.daemon);
    expect(second.kind).toBe("Failed");
    expect(second.kind !== "Started" && second.message).toContain(stateDir);
    expect(second.kind !== "Started" && second.message).toContain("another daemon");
    expect(await healthy(join(stateDir, "api.sock"))).toBe(true);

    // Once the first stops, the directory is free again.
    await daemons.splice(0)[0]?.stop();
    const third = await startDaemon(config(stateDir));
    expect(third.kind).toBe("Started");
    if (third.kind === "Started") daemons.push(third.daemon);
  });

  test("the binary: a daemon killed with SIGKILL leaves nothing that blocks the next start", async () => {
    ensureBuilt();
    const stateDir = tempState();
    const socket = join(stateDir, "api.sock");
    const serve = () => {
      const p = Bun.spawn([BINARY, "serve", "--state-dir", stateDir], {
        stdout: "ignore",
        stderr: "pipe",
      });
      processes.push(p);
      return p;
    };
    const untilHealthy = () =>
      eventually(() => healthy(socket), {
        what: "the daemon answering",
        timeoutMs: 15_000,
        intervalMs: 50,
      });
    const first = serve();
    await untilHealthy();
    // A second binary on the same dir, on another socket path, exits 1 naming the reason.
    const second = Bun.spawn(
      [BINARY, "serve", "--state-dir", stateDir, "--listen", `unix:${socket}.other`],
      {
        stdout: "ignore",
        stderr: "pipe",
      },
    );
    processes.push(second);
    expect(await second.exited).toBe(1);
    expect(await new Response(second.stderr).text()).toContain("another daemon");
    expect(await healthy(socket)).toBe(true);

    first.kill("SIGKILL");
    await first.exited;
    expect(existsSync(socket)).toBe(true); // stale: nobody removed it
    serve();
    await untilHealthy();
  }, 60_000);
});
