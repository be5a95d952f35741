/**
 * Principals through the BUILT binary over TCP (issue 22): the admin adds two principals and
 * issues tokens with the CLI; each principal's CLI sees only its own work, is held to its
 * limit with a 429 that names it, and a revoked token stops working at once.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";

const TEST_TIMEOUT_MS = 90_000;
let daemon: Daemon;
let server: string;

beforeAll(async () => {
  ensureBuilt();
  const port = await freePort();
  server = `http://127.0.0.1:${port}`;
  daemon = await startDaemon({ gateway: false, args: ["--listen", `127.0.0.1:${port}`] });
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await daemon?.stop();
});

/** The CLI over TCP with a token from a file (as a principal is handed one). */
function as(tokenFile: string, command: string, ...args: string[]) {
  // The options before the arguments: after `--` they would be the job's.
  return daemon.cli(command, "--server", server, "--token-file", tokenFile, ...args);
}

async function issue(name: string): Promise<{ file: string; id: string }> {
  const issued = await daemon.cli("token", "issue", name);
  expect(issued.code).toBe(0);
  const token = issued.stdout.trim();
  expect(token).toMatch(/^o4s_[0-9a-f]{16}_\S{43}$/);
  const file = join(daemon.dir, `${name}.token`);
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { file, id: token.split("_")[1] ?? "" };
}

test(
  "two principals over TCP: own work only, a limit with its reason, revocation at once",
  async () => {
    expect((await daemon.cli("principal", "add", "alice", "--max-batch", "1")).code).toBe(0);
    expect((await daemon.cli("principal", "add", "bob")).code).toBe(0);
    const listed = await daemon.cli("principal", "list");
    expect(listed.stdout).toMatch(/alice\s+-\s+-\s+1\s/);
    const alice = await issue("alice");
    const bob = await issue("bob");

    const submitted = await as(alice.file, "submit", "--", "sleep", "60");
    expect(submitted.code).toBe(0);
    const id = submitted.stdout.trim();
    const over = await as(alice.file, "submit", "--", "sleep", "60");
    expect(over.code).toBe(1);
    expect(over.stderr).toContain("batch limit is 1");

    // Bob: alice's workload does not exist for him, by any command.
    for (const command of ["show", "cancel", "logs"]) {
      const r = await as(bob.file, command, id);
      expect({ command, code: r.code }).toEqual({ command, code: 1 });
      expect(r.stderr).toContain("no workload");
    }
    expect((await as(bob.file, "list")).stdout).not.toContain(id);
    expect((await as(bob.file, "principal", "list")).code).toBe(1);

    // Alice and the admin see it; the admin filters by owner.
    expect((await as(alice.file, "list")).stdout).toContain(id);
    const byOwner = await daemon.cli("list", "--owner", "alice");
    expect(byOwner.stdout).toContain(id);
    expect(byOwner.stdout).toContain("alice");
    expect((await daemon.cli("list", "--owner", "bob")).stdout).not.toContain(id);
    expect((await daemon.cli("show", id)).stdout).toMatch(/^Owner:\s+alice$/m);

    expect((await daemon.cli("token", "revoke", alice.id)).code).toBe(0);
    const revoked = await as(alice.file, "list");
    expect(revoked.code).not.toBe(0);
    expect(revoked.stderr.toLowerCase()).toContain("token");
    expect((await daemon.cli("cancel", id)).code).toBe(0);

    // The audit log names alice's submission over TCP with her token's id, and the refusal.
    const audit = await daemon.cli("audit", "--principal", "alice", "--json");
    expect(audit.code).toBe(0);
    const items = (JSON.parse(audit.stdout) as { items: Record<string, unknown>[] }).items;
    expect(items.map((e) => [e["action"], e["status"], e["tokenId"], e["peer"]])).toEqual([
      ["POST /v1/workloads", 201, alice.id, "127.0.0.1"],
      ["POST /v1/workloads", 429, alice.id, "127.0.0.1"],
    ]);
    expect((await as(bob.file, "audit")).code).toBe(1);
  },
  TEST_TIMEOUT_MS,
);
