/**
 * The worker end to end, from source (`bun src/main.ts worker ...`, which is what the
 * `openai4s-worker` name dispatches to), against a real gateway on loopback. Real processes
 * and real time: waits poll with deadlines.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createPrivateKey, createPublicKey, randomBytes, X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { systemClock } from "../../src/lib/clock.ts";
import { mintCredentials } from "../../src/wire/credential.ts";
import {
  certificateFingerprint,
  generateSelfSignedCertificate,
  writeGatewayFingerprint,
} from "../../src/wire/gateway-tls.ts";
import type { CellEvent } from "../../src/wire/worker-protocol.ts";
import { eventually } from "../support/eventually.ts";
import { type Harness, hostPort, realPython, startHarness } from "../support/gateway-harness.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-worker-");

const ROOT = resolve(import.meta.dir, "../..");
const BUN = join(ROOT, "node_modules/.bin/bun");
const MAIN = join(ROOT, "src/main.ts");
const RANK_ENV = "O4S_TEST_RANK";

type Proc = Subprocess<"ignore", "pipe", "pipe">;
const procs: Proc[] = [];
const harnesses: Harness[] = [];
afterEach(async () => {
  for (const p of procs.splice(0)) {
    p.kill("SIGKILL");
    await p.exited;
  }
  for (const h of harnesses.splice(0)) await h.close();
});

function setup(ranks = 1): { h: Harness; credentialDir: string; workspace: string } {
  const h = startHarness(systemClock, { heartbeatIntervalMs: 200 });
  harnesses.push(h);
  h.expectations.set("alloc-w", { epoch: 3, ranks, fenced: false });
  const credentialDir = join(h.dir, "allocations", "alloc-w", "credentials");
  const workspace = join(h.dir, "workspace");
  mkdirSync(workspace, { recursive: true });
  mintCredentials({
    key: h.key,
    allocationId: "alloc-w",
    epoch: 3,
    ranks,
    ttlMs: 60_000,
    clock: systemClock,
    random: randomBytes,
    gatewayAddress: h.gateway.address,
    credentialDir,
  });
  return { h, credentialDir, workspace };
}

function spawnWorker(
  args: readonly string[],
  options: { rank?: string | undefined; cwd?: string } = {},
): Proc {
  const env: Record<string, string | undefined> = { ...process.env };
  delete env[RANK_ENV];
  if (options.rank !== undefined) env[RANK_ENV] = options.rank;
  const p = Bun.spawn([BUN, MAIN, "worker", ...args], {
    env,
    cwd: options.cwd ?? ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  procs.push(p);
  return p;
}

function workerArgs(credentialDir: string, graceSeconds = 1): string[] {
  return [
    "--credential-dir",
    credentialDir,
    "--rank-env",
    RANK_ENV,
    "--grace-seconds",
    String(graceSeconds),
    "--python",
    realPython(),
  ];
}

async function finish(p: Proc): Promise<{ code: number; stdout: string; stderr: string }> {
  const [code, stdout, stderr] = await Promise.all([
    p.exited,
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
  ]);
  return { code, stdout, stderr };
}

function secretsOf(credentialDir: string, rank = 0): string[] {
  const file = JSON.parse(readFileSync(join(credentialDir, `rank-${rank}.cred`), "utf8"));
  return [file.credential.signature, file.credential.nonce];
}

describe("command line", () => {
  test("--help exits 0 with the real help text", async () => {
    const r = await finish(spawnWorker(["--help"]));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("--credential-dir DIR");
    expect(r.stdout).toContain("--rank-env NAME");
  }, 20_000);

  test("usage and configuration errors exit 2", async () => {
    const dir = tempDir();
    const cases: [readonly string[], string | undefined, string][] = [
      [["--credential-dir", dir], "0", "--rank-env is required"],
      [
        ["--credential-dir", dir, "--rank-env", RANK_ENV],
        undefined,
        "must hold this worker's rank",
      ],
      [["--credential-dir", dir, "--rank-env", RANK_ENV], "one", "must hold this worker's rank"],
      [["--credential-dir", dir, "--rank-env", RANK_ENV], "-1", "must hold this worker's rank"],
      [["--credential-dir", dir, "--rank-env", "1BAD"], "0", "not a variable name"],
      [["--credential-dir", dir, "--rank-env", RANK_ENV, "--bogus"], "0", "unknown option"],
      [["--credential-dir", dir, "--rank-env", RANK_ENV], "0", "no credential file"],
    ];
    const results = await Promise.all(
      cases.map(([args, rank]) => finish(spawnWorker(args, { rank }))),
    );
    for (const [i, r] of results.entries()) {
      expect({ code: r.code, case: i }).toEqual({ code: 2, case: i });
      expect(r.stderr).toContain(cases[i]![2]);
    }
  }, 30_000);
});

describe("against a live gateway", () => {
  test("a refused credential exits 1 at once, without retrying and without logging secrets", async () => {
    const { h, credentialDir } = setup();
    h.expectations.delete("alloc-w"); // the daemon no longer expects this allocation
    const started = performance.now();
    const r = await finish(spawnWorker(workerArgs(credentialDir, 30), { rank: "0" }));
    expect(r.code).toBe(1);
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(r.stderr).toContain("refused");
    for (const secret of secretsOf(credentialDir)) expect(r.stderr).not.toContain(secret);
    expect(h.events.filter((e) => e.kind === "CredentialRefused").length).toBe(1);
  }, 30_000);

  test("connects, heartbeats, probes the workspace, runs a stateful kernel, exits on stop", async () => {
    const { h, credentialDir, workspace } = setup(2);
    const workers = ["0", "1"].map((rank) =>
      spawnWorker(workerArgs(credentialDir), { rank, cwd: workspace }),
    );
    const ready = await Promise.race([
      h.gateway.waitForRanks("alloc-w", 3, 2),
      Bun.sleep(20_000).then(() => ({ kind: "TimedOut" })),
    ]);
    expect(ready).toEqual({ kind: "Connected" });

    // Heartbeats move last-seen.
    const seen = h.gateway.connection("alloc-w", 3, 1)!.lastSeenAt;
    await eventually(() => h.gateway.connection("alloc-w", 3, 1)!.lastSeenAt > seen);

    // Workspace probe: the marker with the expected content, the wrong content, nothing.
    const marker = join(workspace, ".openai4s-marker");
    writeFileSync(marker, "epoch-3-token");
    const probe = (path: string, expect: string) =>
      h.gateway.request("alloc-w", 3, 1, { kind: "probe_workspace", path, expect }, 5000);
    expect(await probe(marker, "epoch-3-token")).toEqual({
      kind: "Answered",
      response: { kind: "probe_workspace", found: true, content: "epoch-3-token" },
    });
    expect(await probe(marker, "epoch-2-token")).toMatchObject({
      response: { found: false, content: "epoch-3-token" },
    });
    expect(await probe(join(workspace, "absent"), "x")).toMatchObject({
      response: { found: false, content: null },
    });
    expect(await probe("relative/path", "x")).toMatchObject({ response: { found: false } });

    // The kernel keeps state, streams output, reports errors; it runs in the workspace.
    const exec = async (code: string) => {
      const events: CellEvent[] = [];
      const answer = await h.gateway.request("alloc-w", 3, 0, { kind: "exec", code }, 20_000, {
        onEvent: (e) => events.push(e),
      });
      if (answer.kind !== "Answered") throw new Error(`no answer: ${JSON.stringify(answer)}`);
      const text = (name: string) =>
        events.map((e) => (e.type === "stream" && e.name === name ? e.text : "")).join("");
      return {
        status: answer.response.status,
        value: answer.response.result?.["text/plain"] ?? null,
        error: answer.response.error?.traceback ?? null,
        output: text("stdout"),
        stderr: text("stderr"),
      };
    };
    expect(await exec("x = 41")).toMatchObject({ status: "OK", value: null });
    expect(await exec("x + 1")).toMatchObject({ status: "OK", value: "42" });
    expect(
      await exec("import sys\nprint('to out')\nprint('to err', file=sys.stderr)"),
    ).toMatchObject({ status: "OK", output: "to out\n", stderr: "to err\n" });
    const failed = await exec("undefined_name");
    expect(failed).toMatchObject({ status: "ERROR", value: null });
    expect(failed.error).toContain("NameError");
    expect(await exec("import os\nos.getcwd()")).toMatchObject({ value: `'${workspace}'` });
    // An answer bigger than a frame (3 UTF-8 bytes a character, 200 000 of them twice) is
    // streamed in pieces or shrunk to fit, not allowed to cost the connection.
    const huge = await exec("print('\u20ac' * 200000)\n'\u20ac' * 200000");
    expect(huge.status).toBe("OK");
    // 200 001 characters printed: the cap's head and tail arrive (in frames that fit), with
    // the one character between them counted, and the file holding the whole output named.
    expect(huge.output.startsWith("\u20ac".repeat(100000))).toBe(true);
    expect(huge.output).toMatch(
      /\[\.\.\. 1 more characters not shown; the whole output is in openai4s-outputs\/[^\]]+\]/,
    );
    expect(huge.output.endsWith(`${"\u20ac".repeat(99999)}\n`)).toBe(true);
    expect(huge.value).toContain("more characters not shown");
    expect(huge.value!.startsWith("'\u20ac\u20ac")).toBe(true);
    expect(h.gateway.connected("alloc-w", 3).size).toBe(2);
    expect(await exec("x")).toMatchObject({ value: "41" });
    // Rank 1 has its own kernel.
    expect(
      await h.gateway.request("alloc-w", 3, 1, { kind: "exec", code: "'x' in globals()" }, 20_000),
    ).toMatchObject({ response: { result: { "text/plain": "False" } } });

    expect(h.gateway.stop("alloc-w", 3, "test over")).toBe(2);
    const results = await Promise.all(workers.map(finish));
    for (const r of results) {
      expect(r.code).toBe(0);
      for (const rank of [0, 1]) {
        for (const secret of secretsOf(credentialDir, rank)) expect(r.stderr).not.toContain(secret);
      }
    }
  }, 60_000);

  test("the gateway going away for longer than the grace period makes the worker exit 1", async () => {
    const { h, credentialDir } = setup();
    const worker = spawnWorker(workerArgs(credentialDir, 1), { rank: "0" });
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 20_000 });
    await h.gateway.close();
    const closedAt = performance.now();
    const r = await finish(worker);
    const after = performance.now() - closedAt;
    expect(r.code).toBe(1);
    expect(after).toBeGreaterThanOrEqual(1000);
    expect(after).toBeLessThan(15_000);
    expect(r.stderr).toContain("could not resume within the grace period");
  }, 40_000);

  test("a daemon restart within the grace period keeps the session and its kernel state", async () => {
    const { h, credentialDir } = setup();
    const worker = spawnWorker(workerArgs(credentialDir, 20), { rank: "0" });
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 20_000 });
    const exec = (code: string) =>
      h.gateway.request("alloc-w", 3, 0, { kind: "exec", code }, 20_000);
    expect(await exec("state = 'kept'")).toMatchObject({ response: { status: "OK" } });
    const kernelPid = await exec("import os\nos.getpid()");
    await h.restart(); // same port, same key, same burn table
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 15_000 });
    expect(await exec("state")).toMatchObject({ response: { result: { "text/plain": "'kept'" } } });
    expect(await exec("import os\nos.getpid()")).toEqual(kernelPid);
    h.gateway.stop("alloc-w", 3, "done");
    expect((await finish(worker)).code).toBe(0);
  }, 60_000);

  test("a worker that starts before the gateway keeps dialing until it can connect", async () => {
    const { h, credentialDir } = setup();
    await h.gateway.close(); // the daemon is "not up yet"; the credential names its address
    // Where the daemon will be, something that hangs up on every dial: seen twice, the worker
    // has come back after a failed dial (not a fixed wait that proves nothing on a slow day).
    let dials = 0;
    const hangUp = Bun.listen({
      ...hostPort(h.gateway.address),
      socket: {
        open(socket) {
          dials += 1;
          socket.end();
        },
        data() {},
      },
    });
    const worker = spawnWorker(workerArgs(credentialDir), { rank: "0" });
    try {
      await eventually(() => dials >= 2, { what: "a second dial", timeoutMs: 20_000 });
    } finally {
      hangUp.stop(true);
    }
    expect(worker.exitCode).toBeNull();
    await h.restart();
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 20_000 });
    h.gateway.stop("alloc-w", 3, "done");
    expect((await finish(worker)).code).toBe(0);
  }, 60_000);

  test("SIGTERM stops the worker and kills its kernel", async () => {
    const { h, credentialDir } = setup();
    const worker = spawnWorker(workerArgs(credentialDir), { rank: "0" });
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 20_000 });
    const answer = await h.gateway.request(
      "alloc-w",
      3,
      0,
      { kind: "exec", code: "import os\nos.getpid()" },
      20_000,
    );
    if (answer.kind !== "Answered" || answer.response.kind !== "exec") throw new Error("no pid");
    const kernelPid = Number(answer.response.result?.["text/plain"]);
    worker.kill("SIGTERM");
    expect((await finish(worker)).code).toBe(0);
    await eventually(
      () => {
        try {
          process.kill(kernelPid, 0);
          return !/\) [^Z] /.test(readFileSync(`/proc/${kernelPid}/stat`, "utf8"));
        } catch {
          return true;
        }
      },
      { timeoutMs: 5000 },
    );
  }, 40_000);
});

describe("over TLS, the worker pinning the gateway's certificate", () => {
  /** A gateway with TLS, credentials that point at `via` (default: the gateway itself). */
  function tlsSetup(pin: string | null, via?: (gateway: string) => string) {
    const pair = generateSelfSignedCertificate(new Date());
    const h = startHarness(systemClock, {
      heartbeatIntervalMs: 200,
      tls: { keyPem: pair.keyPem, certPem: pair.certPem },
    });
    harnesses.push(h);
    h.expectations.set("alloc-w", { epoch: 3, ranks: 1, fenced: false });
    const credentialDir = join(h.dir, "allocations", "alloc-w", "credentials");
    mintCredentials({
      key: h.key,
      allocationId: "alloc-w",
      epoch: 3,
      ranks: 1,
      ttlMs: 60_000,
      clock: systemClock,
      random: randomBytes,
      gatewayAddress: via ? via(h.gateway.address) : h.gateway.address,
      credentialDir,
    });
    if (pin !== null) writeGatewayFingerprint(credentialDir, pin);
    return { h, credentialDir, fingerprint: certificateFingerprint(pair.certPem) };
  }

  test("the generated certificate is a valid self-signed X.509 whose fingerprint is the pin", () => {
    const pair = generateSelfSignedCertificate(new Date());
    const cert = new X509Certificate(pair.certPem);
    expect(cert.subject).toBe("CN=openai4s-gateway");
    expect(cert.verify(createPublicKey(pair.keyPem))).toBe(true);
    expect(certificateFingerprint(pair.certPem)).toBe(cert.fingerprint256);
    expect(cert.checkPrivateKey(createPrivateKey(pair.keyPem))).toBe(true);
  });

  test("a passive listener on the path sees no code and no output; the session works", async () => {
    const proxy = recordingProxy();
    const { h, credentialDir, fingerprint } = tlsSetup(null, (g) => proxy.front(g));
    writeGatewayFingerprint(credentialDir, fingerprint);
    const worker = spawnWorker(workerArgs(credentialDir, 1), { rank: "0" });
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 20_000 });
    const secretCode = "secret_code_7f3a = 'the-code-itself'\nprint('secret-output-' + '9b1c')";
    const answer = await h.gateway.request(
      "alloc-w",
      3,
      0,
      { kind: "exec", code: secretCode },
      20_000,
      { onEvent: () => {} },
    );
    expect(answer).toMatchObject({ kind: "Answered", response: { status: "OK" } });
    const seen = proxy.recorded();
    expect(seen.length).toBeGreaterThan(1000); // the listener did see the traffic
    for (const clear of ["secret_code_7f3a", "the-code-itself", "secret-output-9b1c", "alloc-w"]) {
      expect(seen.includes(clear)).toBe(false);
    }
    h.gateway.stop("alloc-w", 3, "done");
    expect((await finish(worker)).code).toBe(0);
    proxy.close();
  }, 40_000);

  test("without the pin (plain TCP, the opt-out) the same listener reads everything", async () => {
    const proxy = recordingProxy();
    const h = startHarness(systemClock, { heartbeatIntervalMs: 200 });
    harnesses.push(h);
    h.expectations.set("alloc-w", { epoch: 3, ranks: 1, fenced: false });
    const credentialDir = join(h.dir, "allocations", "alloc-w", "credentials");
    mintCredentials({
      key: h.key,
      allocationId: "alloc-w",
      epoch: 3,
      ranks: 1,
      ttlMs: 60_000,
      clock: systemClock,
      random: randomBytes,
      gatewayAddress: proxy.front(h.gateway.address),
      credentialDir,
    });
    const worker = spawnWorker(workerArgs(credentialDir, 1), { rank: "0" });
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 20_000 });
    await h.gateway.request(
      "alloc-w",
      3,
      0,
      { kind: "exec", code: "print('in-clear-42')" },
      20_000,
    );
    expect(proxy.recorded().includes("in-clear-42")).toBe(true);
    h.gateway.stop("alloc-w", 3, "done");
    await finish(worker);
    proxy.close();
  }, 40_000);

  test("a worker given the wrong fingerprint sends nothing and exits; its credential stays unburned", async () => {
    const wrong = certificateFingerprint(generateSelfSignedCertificate(new Date()).certPem);
    const { h, credentialDir, fingerprint } = tlsSetup(wrong);
    const r = await finish(spawnWorker(workerArgs(credentialDir, 1), { rank: "0" }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("refusing to talk to the gateway");
    // The gateway never judged a credential: nothing was refused, nobody connected.
    expect(h.events).toEqual([]);
    // And the credential is still good: with the right pin the same file connects.
    writeGatewayFingerprint(credentialDir, fingerprint);
    const worker = spawnWorker(workerArgs(credentialDir, 1), { rank: "0" });
    await eventually(() => h.gateway.connected("alloc-w", 3).size === 1, { timeoutMs: 20_000 });
    h.gateway.stop("alloc-w", 3, "done");
    expect((await finish(worker)).code).toBe(0);
  }, 40_000);

  test("a TLS worker dialing a plain gateway connects to nothing and burns nothing", async () => {
    const h = startHarness(systemClock, { heartbeatIntervalMs: 200 });
    harnesses.push(h);
    h.expectations.set("alloc-w", { epoch: 3, ranks: 1, fenced: false });
    const credentialDir = join(h.dir, "allocations", "alloc-w", "credentials");
    mintCredentials({
      key: h.key,
      allocationId: "alloc-w",
      epoch: 3,
      ranks: 1,
      ttlMs: 60_000,
      clock: systemClock,
      random: randomBytes,
      gatewayAddress: h.gateway.address,
      credentialDir,
    });
    writeGatewayFingerprint(
      credentialDir,
      certificateFingerprint(generateSelfSignedCertificate(new Date()).certPem),
    );
    const worker = spawnWorker(workerArgs(credentialDir, 1), { rank: "0" });
    // The plain gateway reads a TLS ClientHello as a malformed credential and refuses it:
    // the worker's real credential never left the worker.
    await eventually(() => h.events.some((e) => e.kind === "CredentialRefused"), {
      timeoutMs: 10_000,
    });
    expect(h.gateway.connected("alloc-w", 3).size).toBe(0);
    worker.kill("SIGTERM");
    const r = await finish(worker);
    for (const secret of secretsOf(credentialDir)) expect(r.stderr).not.toContain(secret);
  }, 40_000);
});

/** A TCP relay that forwards both ways and keeps every byte it saw (a passive listener). */
function recordingProxy() {
  const seen: Uint8Array[] = [];
  let target: { hostname: string; port: number } | null = null;
  const listener = Bun.listen<{ peer: Promise<import("bun").Socket<undefined>> }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        if (!target) throw new Error("proxy without a target");
        client.data = {
          peer: Bun.connect<undefined>({
            ...target,
            socket: {
              data(_s, chunk) {
                seen.push(new Uint8Array(chunk));
                client.write(chunk);
              },
              close() {
                client.end();
              },
            },
          }),
        };
      },
      async data(_client, chunk) {
        seen.push(new Uint8Array(chunk));
        (await _client.data.peer).write(chunk);
      },
      async close(client) {
        (await client.data?.peer)?.end();
      },
    },
  });
  return {
    front(gateway: string): string {
      const [hostname, port] = gateway.split(":") as [string, string];
      target = { hostname, port: Number(port) };
      return `127.0.0.1:${listener.port}`;
    },
    recorded: () => Buffer.concat(seen).toString("latin1"),
    close: () => listener.stop(true),
  };
}
