/**
 * TLS on the API's TCP listener through the BUILT binary (issue 35: the shipped unit offers
 * the TCP listener with TLS). With `--tls-cert` and `--tls-key` the listener speaks only
 * TLS: the stock CLI reaches it over https with the site's CA trusted (NODE_EXTRA_CA_CERTS),
 * plain HTTP to the same port gets no answer, and a key other users can read stops the start.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BINARY,
  type Daemon,
  ensureBuilt,
  freePort,
  startDaemon,
} from "../support/binary-daemon.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const TIMEOUT_MS = 60_000;
let dir: string;
let cert: string;
let key: string;

/** A certificate for 127.0.0.1 (the CLI checks the name), as a site's CA would issue it. */
function makeCertificate(into: string): { cert: string; key: string } {
  const certPath = join(into, "api-cert.pem");
  const keyPath = join(into, "api-key.pem");
  const made = Bun.spawnSync(
    [
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      "2",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      keyPath,
      "-out",
      certPath,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  if (made.exitCode !== 0) throw new Error(`openssl: ${made.stderr}`);
  chmodSync(keyPath, 0o600);
  return { cert: certPath, key: keyPath };
}

beforeAll(() => {
  ensureBuilt();
  dir = makeTempDir("o4s-listen-tls-");
  ({ cert, key } = makeCertificate(dir));
}, TIMEOUT_MS);

afterAll(() => {
  removeDir(dir);
});

async function withDaemon(port: number, run: (daemon: Daemon) => Promise<void>): Promise<void> {
  const daemon = await startDaemon({
    gateway: false,
    env: { NODE_EXTRA_CA_CERTS: cert },
    args: ["--listen", `127.0.0.1:${port}`, "--tls-cert", cert, "--tls-key", key],
  });
  try {
    await run(daemon);
  } finally {
    await daemon.stop();
  }
}

test(
  "the CLI reaches the listener over https with a token; plain HTTP on its port gets no answer",
  async () => {
    const port = await freePort();
    await withDaemon(port, async (daemon) => {
      const tokenFile = join(daemon.dir, "admin.token");
      writeFileSync(tokenFile, readFileSync(join(daemon.stateDir, "admin-token")), {
        mode: 0o600,
      });
      const server = `https://127.0.0.1:${port}`;
      const r = await daemon.cli("--server", server, "--token-file", tokenFile, "profiles");
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
      expect(r.stdout).toContain("default");
      const plain = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (response) => response.status,
        () => "no answer",
      );
      expect(plain === 200 ? "answered in clear" : "refused").toBe("refused");
    });
  },
  TIMEOUT_MS,
);

test(
  "a key other users can read stops the start, naming --tls-key",
  async () => {
    chmodSync(key, 0o644);
    try {
      const state = join(dir, "refused-state");
      const serve = Bun.spawn(
        [BINARY, "serve", "--state-dir", state, "--spool-dir", `${state}-spool`]
          .concat(["--listen", `127.0.0.1:${await freePort()}`])
          .concat(["--tls-cert", cert, "--tls-key", key]),
        { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, stdout: "pipe", stderr: "pipe" },
      );
      const timer = setTimeout(() => serve.kill("SIGKILL"), 20_000);
      const [stderr, code] = await Promise.all([new Response(serve.stderr).text(), serve.exited]);
      clearTimeout(timer);
      expect(code).not.toBe(0);
      expect(stderr).toContain(`--tls-key ${key} is not a private file`);
    } finally {
      chmodSync(key, 0o600);
    }
  },
  TIMEOUT_MS,
);
