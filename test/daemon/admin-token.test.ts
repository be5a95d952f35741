import { describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AdminTokenError, loadOrCreateAdminToken } from "../../src/apps/daemon/admin-token.ts";
import { tempDirs } from "../support/temp-dir.ts";

const newDir = tempDirs("o4s-token-", "each");
function tokenPath(): string {
  const d = newDir();
  return join(d, "admin-token");
}

describe("admin token", () => {
  test("created on first use, 0600, 256 bits; the same on the next start", () => {
    const path = tokenPath();
    const token = loadOrCreateAdminToken(path);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, "utf8")).toBe(`${token}\n`);
    expect(loadOrCreateAdminToken(path)).toBe(token);
  });

  test("a token file others can read is refused, not silently fixed", () => {
    const path = tokenPath();
    loadOrCreateAdminToken(path);
    chmodSync(path, 0o644);
    expect(() => loadOrCreateAdminToken(path)).toThrow(AdminTokenError);
    expect(() => loadOrCreateAdminToken(path)).toThrow(/mode 644/);
  });

  test("a file that is not a token is refused", () => {
    const path = tokenPath();
    writeFileSync(path, "hunter2\n", { mode: 0o600 });
    expect(() => loadOrCreateAdminToken(path)).toThrow(AdminTokenError);
  });

  test("concurrent first starts agree on one token", async () => {
    const path = tokenPath();
    const script = `
      import { loadOrCreateAdminToken } from ${JSON.stringify(join(import.meta.dir, "../../src/apps/daemon/admin-token.ts"))};
      process.stdout.write(loadOrCreateAdminToken(process.env.TOKEN_PATH));
    `;
    const procs = Array.from({ length: 6 }, () =>
      Bun.spawn([process.execPath, "-e", script], {
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, TOKEN_PATH: path },
      }),
    );
    const tokens = await Promise.all(procs.map((p) => new Response(p.stdout).text()));
    await Promise.all(procs.map((p) => p.exited));
    expect(new Set(tokens).size).toBe(1);
    expect(tokens[0]).toBe(readFileSync(path, "utf8").trim());
  });
});
