import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import {
  type DaemonConfig,
  type RunningDaemon,
  startDaemon,
} from "../../src/apps/daemon/daemon.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { localDaemonConfig } from "../support/daemon-config.ts";
import { tempDirs } from "../support/temp-dir.ts";

const daemons: RunningDaemon[] = [];
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
});
// After the daemons' hook: hooks run in order, and a daemon still running writes into its dir.
const tempDir = tempDirs("o4s-daemon-", "each");

function config(overrides: Partial<DaemonConfig> = {}): DaemonConfig {
  const root = tempDir();
  const stateDir = join(root, "state");
  return localDaemonConfig(stateDir, overrides);
}

async function started(c: DaemonConfig): Promise<RunningDaemon> {
  const result = await startDaemon(c);
  if (result.kind !== "Started") throw new Error(`did not start: ${JSON.stringify(result)}`);
  daemons.push(result.daemon);
  return result.daemon;
}

const mode = (path: string) => statSync(path).mode & 0o777;

describe("startDaemon", () => {
  test("private state: dir 0700, token, database and socket 0600", async () => {
    const c = config();
    const d = await started(c);
    expect(mode(c.stateDir)).toBe(0o700);
    expect(mode(d.layout.adminToken)).toBe(0o600);
    expect(mode(d.layout.database)).toBe(0o600);
    expect(mode(d.layout.apiSocket)).toBe(0o600);
    expect(statSync(d.layout.apiSocket).isSocket()).toBe(true);
    const res = await fetch("http://localhost/healthz", { unix: d.layout.apiSocket });
    expect(await res.json()).toEqual({ status: "ok" });
  });

  test("the spool: default sibling 0711; overlapping the private dir is refused", async () => {
    const c = config();
    const d = await started(c);
    expect(d.layout.spool).toBe(`${c.stateDir}-spool`);
    expect(mode(d.layout.spool)).toBe(0o711);
    await d.stop();
    for (const spoolDir of [join(c.stateDir, "spool"), join(c.stateDir, "..")]) {
      const refused = await startDaemon({ ...c, spoolDir, log: memoryLog() });
      expect(refused.kind).toBe("ConfigError");
    }
  });

  test("a spool another user could replace is refused, naming the parent", async () => {
    const c = config();
    const parent = join(tempDir(), "shared");
    mkdirSync(parent, { mode: 0o755 });
    chmodSync(parent, 0o777);
    const writable = await startDaemon({ ...c, spoolDir: join(parent, "spool"), log: memoryLog() });
    expect(writable.kind).toBe("ConfigError");
    expect(writable.kind === "ConfigError" && writable.message).toContain(
      `${parent} (above the spool dir`,
    );
    // Refused before anything is made in a directory another user controls.
    expect(existsSync(join(parent, "spool"))).toBe(false);
    if (process.geteuid?.() !== 0) return;
    // Root: a parent owned by another user, not writable by others, is refused as well.
    chmodSync(parent, 0o755);
    chownSync(parent, 65534, 65534);
    const theirs = await startDaemon({ ...c, spoolDir: join(parent, "spool"), log: memoryLog() });
    expect(theirs.kind === "ConfigError" && theirs.message).toContain("uid 65534");
    expect(existsSync(join(parent, "spool"))).toBe(false);
    // Made earlier (by someone): judged the same way once it exists.
    mkdirSync(join(parent, "spool"), { mode: 0o711 });
    const existing = await startDaemon({ ...c, spoolDir: join(parent, "spool"), log: memoryLog() });
    expect(existing.kind === "ConfigError" && existing.message).toContain("uid 65534");
  });

  test("a cluster backend without --spool-dir is a configuration error", async () => {
    const c = config({ backend: "slurm", clusterConfigPath: "/nonexistent.toml" });
    const result = await startDaemon(c);
    expect(result.kind).toBe("ConfigError");
    expect(result.kind === "ConfigError" && result.message).toContain("--spool-dir");
  });

  test("TCP needs the admin token; the unix socket does not", async () => {
    const c = config();
    const d = await started({
      ...c,
      listen: [...c.listen, { kind: "tcp", host: "127.0.0.1", port: 0 }],
    });
    const tcp = d.listening.find((l) => l.startsWith("127.0.0.1:"));
    expect(tcp).toBeDefined();
    const url = `http://${tcp}/v1/profiles`;
    const token = readFileSync(d.layout.adminToken, "utf8").trim();
    const anonymous = await fetch(url);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("content-type")).toContain("application/problem+json");
    expect((await fetch(url, { headers: { Authorization: "Bearer wrong" } })).status).toBe(401);
    const ok = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
    const viaSocket = await fetch("http://localhost/v1/profiles", {
      unix: d.layout.apiSocket,
    });
    expect(viaSocket.status).toBe(200);
  });

  test("a second daemon on a live socket refuses to start and leaves the first alone", async () => {
    const c = config();
    const first = await started(c);
    const second = await startDaemon({ ...c, log: memoryLog() });
    expect(second.kind).toBe("Failed");
    expect(second.kind === "Failed" && second.message).toContain("another daemon");
    const res = await fetch("http://localhost/healthz", { unix: first.layout.apiSocket });
    expect(res.status).toBe(200);
  });

  test("stop(): socket removed, database closed cleanly, and a restart works", async () => {
    const c = config();
    const d = await started(c);
    await d.stop();
    await d.stop();
    expect(existsSync(d.layout.apiSocket)).toBe(false);
    // A clean close leaves every commit in the main file: the WAL is gone or empty.
    const wal = `${d.layout.database}-wal`;
    expect(existsSync(wal) ? statSync(wal).size : 0).toBe(0);
    const reopened = openDatabase(d.layout.database);
    reopened.close();
    await started({ ...c, log: memoryLog() });
  });

  test.each([
    ["an unknown backend", { backend: "nope" }, /unknown backend "nope"/],
    [
      "a cluster config for the local backend",
      { clusterConfigPath: "/etc/c.toml" },
      /--cluster-config/,
    ],
    [
      "an invalid worker listen address",
      { env: { OPENAI4S_WORKER_LISTEN: "nope" } },
      /OPENAI4S_WORKER_LISTEN/,
    ],
  ] as const)(
    "%s is a configuration error, and nothing keeps listening",
    async (_l, o, message) => {
      const c = config(o as Partial<DaemonConfig>);
      const result = await startDaemon(c);
      expect(result.kind).toBe("ConfigError");
      expect(result.kind === "ConfigError" && result.message).toMatch(message);
      expect(existsSync(join(c.stateDir, "api.sock"))).toBe(false);
    },
  );

  test("a TCP port in use: Failed, and the unix socket opened before it is removed again", async () => {
    const blocker = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    try {
      const c = config();
      const result = await startDaemon({
        ...c,
        listen: [...c.listen, { kind: "tcp", host: "127.0.0.1", port: blocker.port as number }],
      });
      expect(result.kind).toBe("Failed");
      expect(existsSync(join(c.stateDir, "api.sock"))).toBe(false);
    } finally {
      await blocker.stop(true);
    }
  });
});
