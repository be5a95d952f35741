/**
 * A profile's network through the built binary on the local backend: with `none`
 * (OPENAI4S_LOCAL_NETWORK=none) a BATCH job reaches no host service on loopback (a listener
 * of this test, the daemon's own worker gateway port), while a session's worker still
 * reaches the gateway through its unix socket and the session gets READY and executes.
 * The same job on a `host` daemon reaches the listener: the control that the probe works.
 * The same for a daemon that is not root (bwrap in a user namespace). With a profiles file
 * (OPENAI4S_LOCAL_PROFILES) the network is each profile's: one daemon, a profile that does
 * not say (none) and one that says host, side by side; the admin API's TCP port is out of
 * reach of the first.
 * Seen failing without `--unshare-net` (the job connected) and without the socket bind
 * (the session never got READY).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const TIMEOUT_MS = 90_000;
const HAS_BWRAP = Bun.which("bwrap") !== null;

/** Prints, for each port, "open" or the error name of the connect. */
function dialer(ports: readonly number[]): string {
  return `
import socket
for port in ${JSON.stringify(ports)}:
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(('127.0.0.1', port))
        print(port, 'open')
    except OSError as e:
        print(port, type(e).__name__)
    finally:
        s.close()
`;
}

async function runBatch(
  d: Daemon,
  code: string,
  profile = "default",
): Promise<{ phase: string; out: string }> {
  const r = await d.cli("submit", "--profile", profile, "--", "python3", "-c", code);
  if (r.code !== 0) throw new Error(`submit failed: ${r.stderr}`);
  const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
  await d.cli("wait", id, "--timeout", "45s");
  const view = await d.show(id);
  return { phase: view.phase, out: (await d.cli("logs", id)).stdout };
}

function gatewayPort(d: Daemon): number {
  const match = /"address":"127\.0\.0\.1:(\d+)"/.exec(d.log());
  if (match === null) throw new Error(`no gateway address in the log:\n${d.log()}`);
  return Number(match[1]);
}

describe.skipIf(!HAS_BWRAP)("network per profile, local backend", () => {
  let none: Daemon;
  let host: Daemon;
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  beforeAll(async () => {
    await ensureBuilt();
    none = await startDaemon({ env: { OPENAI4S_LOCAL_NETWORK: "none" } });
    host = await startDaemon({ gateway: false });
  }, TIMEOUT_MS);
  afterAll(async () => {
    await none?.stop();
    await host?.stop();
    listener.stop(true);
  });

  test(
    "none: a job reaches no loopback service of the host, the gateway's port included",
    async () => {
      const ports = [listener.port, gatewayPort(none)];
      const ran = await runBatch(none, dialer(ports));
      expect(ran.phase).toBe("COMPLETED");
      for (const port of ports) expect(ran.out).toContain(`${port} ConnectionRefusedError`);
    },
    TIMEOUT_MS,
  );

  test(
    "host: the same job reaches the listener (the control)",
    async () => {
      const ran = await runBatch(host, dialer([listener.port]));
      expect(ran.out).toContain(`${listener.port} open`);
    },
    TIMEOUT_MS,
  );

  test(
    "none: a session's worker reaches the gateway through its socket: READY, and it runs code",
    async () => {
      const started = await none.cli("session", "start", "--profile", "default");
      if (started.code !== 0) throw new Error(`session start failed: ${started.stderr}`);
      const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
      const ready = await none.cli("wait", id, "--until", "READY", "--timeout", "45s");
      if (ready.code !== 0)
        throw new Error(`not READY: ${ready.stdout}${ready.stderr}\n${none.log()}`);
      const ran = await none.cli("exec", id, "import socket; print(6 * 7)", "--json");
      expect((JSON.parse(ran.stdout) as { output: string }).output).toContain("42");
      await none.cli("cancel", id);
    },
    TIMEOUT_MS,
  );
});

describe.skipIf(!HAS_BWRAP || process.getuid?.() !== 0)(
  "network none, a daemon that is not root",
  () => {
    const UID = 4248;
    let d: Daemon;
    const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    beforeAll(async () => {
      await ensureBuilt();
      d = await startDaemon({
        daemonUid: UID,
        env: {
          PATH: "/usr/local/bin:/usr/bin:/bin",
          HOME: "/nonexistent",
          OPENAI4S_LOCAL_NETWORK: "none",
        },
      });
    }, TIMEOUT_MS);
    afterAll(async () => {
      await d?.stop();
      listener.stop(true);
    });

    test(
      "its own network namespace inside the user namespace; the session still gets READY",
      async () => {
        const ran = await runBatch(d, dialer([listener.port]));
        expect(ran.out).toContain(`${listener.port} ConnectionRefusedError`);
        const started = await d.cli("session", "start", "--profile", "default");
        const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
        const ready = await d.cli("wait", id, "--until", "READY", "--timeout", "45s");
        if (ready.code !== 0)
          throw new Error(`not READY: ${ready.stdout}${ready.stderr}\n${d.log()}`);
        const out = await d.cli("exec", id, "print(6 * 7)", "--json");
        expect((JSON.parse(out.stdout) as { output: string }).output).toContain("42");
        await d.cli("cancel", id);
      },
      TIMEOUT_MS,
    );
  },
);

describe.skipIf(!HAS_BWRAP)("network per profile from a profiles file", () => {
  const PROFILES = `[profiles.sealed]
description = "Says nothing about network: none"
allow_batch = true

[profiles.open]
description = "The host's network"
network = "host"
allow_batch = true
`;
  let d: Daemon;
  let adminPort = 0;
  const scratch = makeTempDir("o4s-network-profiles-");
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  beforeAll(async () => {
    await ensureBuilt();
    const file = join(scratch, "local.toml");
    writeFileSync(file, PROFILES);
    adminPort = await freePort();
    d = await startDaemon({
      args: ["--listen", `127.0.0.1:${adminPort}`],
      env: { OPENAI4S_LOCAL_PROFILES: file },
    });
  }, TIMEOUT_MS);
  afterAll(async () => {
    await d?.stop();
    listener.stop(true);
    removeDir(scratch);
  });

  test(
    "a profile that does not say: no loopback service, not the admin API, not the gateway",
    async () => {
      const ports = [listener.port, adminPort, gatewayPort(d)];
      const ran = await runBatch(d, dialer(ports), "sealed");
      expect(ran.phase).toBe("COMPLETED");
      for (const port of ports) expect(ran.out).toContain(`${port} ConnectionRefusedError`);
    },
    TIMEOUT_MS,
  );

  test(
    "network = host on the same daemon: the listener and the admin API answer (the control)",
    async () => {
      const ran = await runBatch(d, dialer([listener.port, adminPort]), "open");
      expect(ran.out).toContain(`${listener.port} open`);
      expect(ran.out).toContain(`${adminPort} open`);
    },
    TIMEOUT_MS,
  );
});
