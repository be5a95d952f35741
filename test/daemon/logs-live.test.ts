/**
 * `openai4s logs --follow` on the local backend with a real job: the first line is printed
 * while the job provably still runs (it waits for a file the test creates), and the command
 * returns once the attempt has ended, with everything the job wrote.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import { main } from "../../src/main.ts";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

let dir: string;
let daemon: RunningDaemon;

beforeAll(async () => {
  dir = makeTempDir("o4s-logs-live-");
  const stateDir = join(dir, "state");
  daemon = await startedDaemon(localDaemonConfig(stateDir));
});

afterAll(async () => {
  await daemon?.stop();
  removeDir(dir);
});

describe("openai4s logs --follow (local backend)", () => {
  test("prints output while the job runs and returns when it ends", async () => {
    const env = { OPENAI4S_SERVER: `unix:${daemon.layout.apiSocket}` };
    // In the job's workspace (its working directory): a sandboxed job, running as another
    // uid, sees nothing else of this machine's temp dir.
    let submitted = "";
    const submitIo = {
      stdout: (t: string) => {
        submitted += t;
      },
      stderr: () => {},
      env,
    };
    const script = "echo first; while [ ! -e gate ]; do sleep 0.1; done; echo second";
    expect(await main("openai4s", ["submit", "--", "sh", "-c", script], submitIo)).toBe(0);
    const id = submitted.trim();
    let out = "";
    let sawFirst: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      sawFirst = resolve;
    });
    const io = {
      stdout: (t: string) => {
        out += t;
        if (out.includes("first\n")) sawFirst();
      },
      stderr: (t: string) => {
        out += `[stderr] ${t}`;
      },
      env,
    };
    const following = main("openai4s", ["logs", "--follow", id], io);
    await first;
    // Live: the job is still waiting for the gate, so the command has not returned.
    let returned = false;
    following.then(() => {
      returned = true;
    });
    await Bun.sleep(0);
    expect(returned).toBe(false);
    const shown = await fetch(`http://localhost/v1/workloads/${id}`, {
      unix: daemon.layout.apiSocket,
    } as RequestInit);
    // The store may still say QUEUED (the job printed before the next observation): the
    // point is that it has not ended.
    expect(["QUEUED", "RUNNING"]).toContain(((await shown.json()) as { phase: string }).phase);
    writeFileSync(join(daemon.layout.workspaceDir(id), "gate"), "");
    expect(await following).toBe(0);
    expect(out).toBe("first\nsecond\n");
  }, 60_000);

  test("a job quiet for longer than the server's idle timeout (10 s) is followed to its end", async () => {
    const env = { OPENAI4S_SERVER: `unix:${daemon.layout.apiSocket}` };
    let submitted = "";
    const quiet = "echo before; sleep 12; echo after";
    const submitIo = {
      stdout: (t: string) => {
        submitted += t;
      },
      stderr: () => {},
      env,
    };
    expect(await main("openai4s", ["submit", "--", "sh", "-c", quiet], submitIo)).toBe(0);
    let out = "";
    let err = "";
    const io = {
      stdout: (t: string) => {
        out += t;
      },
      stderr: (t: string) => {
        err += t;
      },
      env,
    };
    expect(await main("openai4s", ["logs", "--follow", submitted.trim()], io)).toBe(0);
    expect(err).toBe("");
    expect(out).toBe("before\nafter\n");
  }, 60_000);
});
