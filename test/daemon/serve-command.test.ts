import { describe, expect, test } from "bun:test";
import { UsageError } from "../../src/cli/command.ts";
import { BACKENDS } from "../../src/composition-root.ts";
import { parseServeArgs } from "../../src/daemon/serve-command.ts";
import { main } from "../../src/main.ts";
import { captureIo } from "../cli/support.ts";

const parse = (args: string[], env: Record<string, string> = {}) =>
  parseServeArgs(args, env, "/srv/o4s", "/home/ada");

describe("serve flags", () => {
  test("defaults: the state dir's socket, the default backend", () => {
    expect(parse([], { OPENAI4S_STATE_DIR: "/s" })).toEqual({
      stateDir: "/s",
      listen: [{ kind: "unix", path: "/s/api.sock" }],
      backend: "local",
      clusterConfigPath: null,
      logLevel: "info",
    });
  });

  test("repeatable --listen, relative paths resolved, cluster config absolute", () => {
    const options = parse([
      "--state-dir",
      "st",
      "--listen",
      "unix:a.sock",
      "--listen",
      "127.0.0.1:8080",
      "--listen",
      "[::1]:8081",
      "--cluster-config",
      "c.toml",
    ]);
    expect(options).toMatchObject({
      stateDir: "/srv/o4s/st",
      listen: [
        { kind: "unix", path: "/srv/o4s/a.sock" },
        { kind: "tcp", host: "127.0.0.1", port: 8080 },
        { kind: "tcp", host: "::1", port: 8081 },
      ],
      clusterConfigPath: "/srv/o4s/c.toml",
    });
  });

  test("a non-loopback address needs --allow-remote", () => {
    expect(() => parse(["--listen", "0.0.0.0:8080"])).toThrow(/--allow-remote/);
    expect(parse(["--listen", "0.0.0.0:8080", "--allow-remote"])).toMatchObject({
      listen: [{ kind: "tcp", host: "0.0.0.0", port: 8080 }],
    });
  });

  test.each([
    [["--listen", "nonsense"], "--listen"],
    [["--backend", "nope"], "--backend"],
    [["--log-level", "loud"], "--log-level"],
    [["--frobnicate"], "--frobnicate"],
    [["extra"], "extra"],
    [["--state-dir"], "--state-dir"],
  ])("%p is a usage error naming %s", (args, named) => {
    expect(() => parse(args)).toThrow(UsageError);
    expect(() => parse(args)).toThrow(named);
  });

  test("through main: usage errors exit 2 before anything starts", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["serve", "--listen", "10.1.2.3:80"], io)).toBe(2);
    expect(io.err()).toContain("--allow-remote");
  });

  test("--help lists every registered backend and exits 0", async () => {
    const io = captureIo();
    expect(await main("openai4s", ["serve", "--help"], io)).toBe(0);
    for (const [name, entry] of Object.entries(BACKENDS)) {
      expect(io.out()).toContain(name);
      expect(io.out()).toContain(entry.describe);
    }
    expect(io.out()).toContain("--allow-remote");
  });
});
