/**
 * The one-POST commands (cancel, interrupt, restart) share one body
 * (src/apps/cli/workload-action.ts): the request each sends, how each prints its answer,
 * and the exit status a restart whose fresh kernel did not start gives, with --json too.
 */
import { describe, expect, test } from "bun:test";
import { createCancelCommand } from "../../src/apps/cli/cancel.ts";
import type { ClientRuntime } from "../../src/apps/cli/client.ts";
import { createInterruptCommand } from "../../src/apps/cli/interrupt.ts";
import { createRestartCommand } from "../../src/apps/cli/restart.ts";
import { UsageError } from "../../src/lib/command/command.ts";
import { captureIo } from "../support/cli-runtime.ts";

/** A daemon that answers every request with `body` (200, JSON); requests are written down. */
function answering(body: unknown) {
  const requests: { method: string; path: string }[] = [];
  const runtime: ClientRuntime = {
    fetch: async (url, init) => {
      requests.push({ method: String(init.method), path: new URL(url).pathname });
      return Response.json(body);
    },
    homeDir: () => "/home/test",
    cwd: () => "/srv/o4s",
    // As the file system answers for a file that is not there (the site's client.toml).
    readFile: async (path) => {
      throw Object.assign(new Error(`ENOENT: no such file: ${path} (no files in this test)`), {
        code: "ENOENT",
      });
    },
    fileExists: async () => false,
    isTty: () => false,
    sleep: async () => {},
    now: () => 1_800_000_000_000,
  };
  return { runtime, requests };
}

const SERVER = ["--server", "unix:/run/o4s.sock"];

describe("one POST per command", () => {
  test("each posts its own action for the id, encoded", async () => {
    for (const [name, create] of [
      ["cancel", createCancelCommand],
      ["interrupt", createInterruptCommand],
      ["restart", createRestartCommand],
    ] as const) {
      const { runtime, requests } = answering({ id: "w-1", phase: "RUNNING", running: true });
      await create(runtime).run(["w 1", ...SERVER], captureIo());
      expect(requests).toEqual([{ method: "POST", path: `/v1/workloads/w%201/${name}` }]);
    }
  });

  test("each prints its answer in its own words", async () => {
    const cases = [
      [
        createCancelCommand,
        { id: "w-1", phase: "RUNNING" },
        "cancel requested: w-1 (now RUNNING)\n",
      ],
      [createInterruptCommand, { interrupted: true }, "interrupted\n"],
      [createInterruptCommand, { interrupted: false }, "nothing was running\n"],
      [createRestartCommand, { running: true }, "restarted: a fresh kernel is running\n"],
    ] as const;
    for (const [create, body, printed] of cases) {
      const io = captureIo();
      expect(await create(answering(body).runtime).run(["w-1", ...SERVER], io)).toBe(0);
      expect(io.out()).toBe(printed);
    }
  });

  test("a restart whose kernel did not start exits 1, saying why, with --json too", async () => {
    const body = { running: false, message: "the session is not READY" };
    const io = captureIo();
    expect(await createRestartCommand(answering(body).runtime).run(["w-1", ...SERVER], io)).toBe(1);
    expect(io.err()).toBe("openai4s restart: the session is not READY\n");
    const json = captureIo();
    const code = await createRestartCommand(answering(body).runtime).run(
      ["w-1", "--json", ...SERVER],
      json,
    );
    expect(code).toBe(1);
    expect(JSON.parse(json.out())).toEqual(body);
  });

  test("no id, or two, is a usage error naming the command; nothing is sent", async () => {
    const { runtime, requests } = answering({});
    for (const args of [[], ["a", "b"]]) {
      const run = createInterruptCommand(runtime).run([...args, ...SERVER], captureIo());
      await expect(run).rejects.toThrow(UsageError);
      await expect(
        createInterruptCommand(runtime).run([...args, ...SERVER], captureIo()),
      ).rejects.toThrow(/interrupt:/);
    }
    expect(requests).toEqual([]);
  });
});
