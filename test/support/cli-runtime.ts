/**
 * Client commands against the real API in process: the runtime's fetch routes to
 * `app.request()`, so a command's whole path (flags, request, rendering, exit code) runs
 * without a socket. Time and sleep are manual.
 */
import type { ClientRuntime } from "../../src/apps/cli/client.ts";
import type { CommandIo } from "../../src/lib/command/command.ts";
import type { Harness } from "./api-harness.ts";

export interface CapturedIo extends CommandIo {
  out(): string;
  err(): string;
}

export function captureIo(env: Record<string, string | undefined> = {}): CapturedIo {
  let out = "";
  let err = "";
  return {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    env,
    out: () => out,
    err: () => err,
  };
}

export interface TestRuntime extends ClientRuntime {
  readonly requests: { url: string; init: RequestInit & { unix?: string } }[];
  nowMs: number;
  onSleep: (ms: number) => void | Promise<void>;
}

export function runtimeFor(h: Harness, options: { readonly tty?: boolean } = {}): TestRuntime {
  const runtime: TestRuntime = {
    requests: [],
    nowMs: 1_800_000_000_000,
    onSleep: () => {},
    fetch: async (url, init) => {
      runtime.requests.push({ url, init });
      const u = new URL(url);
      const { unix: _unix, ...rest } = init;
      return await h.app.request(`${u.pathname}${u.search}`, rest, {
        access: { kind: "LocalSocket" },
      });
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
    isTty: () => options.tty === true,
    sleep: async (ms) => {
      runtime.nowMs += ms;
      await runtime.onSleep(ms);
    },
    now: () => runtime.nowMs,
  };
  return runtime;
}
