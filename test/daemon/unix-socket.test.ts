import { describe, expect, test } from "bun:test";
import { existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  clearStaleSocket,
  removeSocket,
  withPrivateSocket,
} from "../../src/apps/daemon/unix-socket.ts";
import { systemTimers } from "../../src/lib/clock.ts";
import { tempDirs } from "../support/temp-dir.ts";

const newDir = tempDirs("o4s-sock-", "each");
function socketPath(): string {
  const d = newDir();
  return join(d, "api.sock");
}

describe("the API socket file", () => {
  test("a missing path is free", async () => {
    expect(await clearStaleSocket(socketPath(), systemTimers)).toEqual({ kind: "Free" });
  });

  test("is created 0600, and a live listener is never unlinked", async () => {
    const path = socketPath();
    const server = withPrivateSocket(path, () =>
      Bun.serve({ unix: path, fetch: () => new Response("hi") }),
    );
    try {
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect((await clearStaleSocket(path, systemTimers)).kind).toBe("InUse");
      expect(existsSync(path)).toBe(true);
    } finally {
      await server.stop(true);
    }
  });

  test("a leftover socket nobody answers on is removed", async () => {
    const path = socketPath();
    // A child that binds the socket and is then SIGKILLed leaves the file behind, as a
    // crashed daemon would.
    const child = Bun.spawn(
      [
        process.execPath,
        "-e",
        `Bun.serve({ unix: ${JSON.stringify(path)}, fetch: () => new Response("x") }); console.log("up");`,
      ],
      { stdout: "pipe" },
    );
    const reader = child.stdout.getReader();
    await reader.read();
    child.kill("SIGKILL");
    await child.exited;
    expect(existsSync(path)).toBe(true);
    expect(await clearStaleSocket(path, systemTimers)).toEqual({ kind: "StaleRemoved" });
    expect(existsSync(path)).toBe(false);
  });

  test("a regular file at the path is not touched", async () => {
    const path = socketPath();
    writeFileSync(path, "precious");
    expect((await clearStaleSocket(path, systemTimers)).kind).toBe("NotASocket");
    removeSocket(path);
    expect(existsSync(path)).toBe(true);
  });
});
