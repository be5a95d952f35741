/**
 * A daemon that dies mid-answer, as the BUILT client sees it: a stand-in server on a unix
 * socket sends the status line and part of the body, then closes. Every command reports it
 * in one line with exit 1 (not the runtime's TypeError and a source listing), and backup
 * leaves no partial copy behind.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { BINARY, ensureBuilt } from "../support/binary.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

let dir: string;
let socket: string;
let server: ReturnType<typeof Bun.listen>;

beforeAll(() => {
  ensureBuilt();
  dir = makeTempDir("o4s-connection-lost-");
  socket = join(dir, "fake.sock");
  server = Bun.listen({
    unix: socket,
    socket: {
      data(s, data) {
        const request = data.toString();
        // Streamed answers (a backup, a log) are cut after their first chunk, JSON answers
        // after a few bytes of the length they announced.
        const streamed = request.startsWith("POST /v1/backup") || request.includes("/logs");
        s.write(
          streamed
            ? "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
            : 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"workloads":[',
        );
        s.end();
      },
    },
  });
});

afterAll(() => {
  server?.stop(true);
  if (dir) removeDir(dir);
});

async function run(...args: string[]) {
  const p = Bun.spawn([BINARY, ...args, "--server", `unix:${socket}`], {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: dir },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  return { stdout, stderr, code };
}

test.each<readonly string[]>([["list"], ["show", "w-abc"], ["profiles"], ["logs", "w-abc"]])(
  "%p: a dropped connection is one line on stderr, exit 1",
  async (...args: string[]) => {
    const r = await run(...args);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^openai4s \S+: the connection to the daemon at unix:.* was lost[^\n]*\n$/,
    );
    expect(r.stderr).not.toContain("TypeError");
  },
);

test("backup: a dropped connection is one line, exit 1, and no partial copy is left", async () => {
  const dest = join(dir, "copy.db");
  const r = await run("backup", dest);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(
    /^openai4s backup: the connection to the daemon at .* was lost[^\n]*\n$/,
  );
  expect(existsSync(dest)).toBe(false);
});
