/**
 * Hostile HTTP at the edges of the BUILT daemon, over raw sockets on both listeners: a client
 * that leaves mid-body or breaks chunked framing is not a server error, no file handle
 * outlives its request, and a body that stops arriving is cut on the unix socket as on TCP.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { createConnection } from "node:net";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const BODY_TIMEOUT_MS = 1000;
const TEST_TIMEOUT_MS = 60_000;

let daemon: Daemon;
let port: number;
let token: string;
/** Client aborts so far, on both listeners: the metrics count them together. */
let aborted = 0;

type Target = "unix" | "tcp";

beforeAll(async () => {
  ensureBuilt();
  port = await freePort();
  daemon = await startDaemon({
    gateway: false,
    args: ["--listen", `127.0.0.1:${port}`, "--body-timeout-ms", String(BODY_TIMEOUT_MS)],
  });
  token = (await Bun.file(`${daemon.stateDir}/admin-token`).text()).trim();
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await daemon?.stop();
});

interface Exchange {
  /** Everything the daemon sent before it closed (or before we gave up). */
  readonly received: string;
  /** The daemon closed the connection. */
  readonly closed: boolean;
  readonly elapsedMs: number;
}

/**
 * Sends the raw request (with the admin token added after the request line on TCP), then
 * either hangs up (`hangUp`) or waits up to `waitMs` for the daemon to answer and close.
 */
function exchange(
  target: Target,
  raw: string,
  options: { readonly hangUp?: boolean; readonly waitMs?: number } = {},
): Promise<Exchange> {
  const started = performance.now();
  const auth = target === "tcp" ? `Authorization: Bearer ${token}\r\n` : "";
  const request = raw.replace("\r\n", `\r\n${auth}`);
  return new Promise((resolve) => {
    const socket =
      target === "unix"
        ? createConnection({ path: daemon.socket })
        : createConnection({ host: "127.0.0.1", port });
    let received = "";
    let settled = false;
    const done = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received, closed, elapsedMs: performance.now() - started });
    };
    const timer = setTimeout(() => done(false), options.waitMs ?? 10_000);
    socket.on("data", (data) => {
      received += data.toString("latin1");
    });
    socket.on("close", () => done(true));
    socket.on("error", () => done(true));
    socket.on("connect", () => {
      socket.write(request, () => {
        if (options.hangUp) done(true);
      });
    });
  });
}

async function metricsText(): Promise<string> {
  const res = await exchange(
    "unix",
    "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
  );
  return res.received;
}

function serverErrorLines(metrics: string): string[] {
  return metrics
    .split("\n")
    .filter((l) => l.startsWith("openai4s_http_requests_total") && /status="5\d\d"/.test(l));
}

function openFds(): number {
  return readdirSync(`/proc/${daemon.proc.pid}/fd`).length;
}

const SUBMIT_HEAD =
  "POST /v1/workloads HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";

describe.each<Target>(["unix", "tcp"])("on the %s listener", (target) => {
  test(
    "a client that aborts mid-body or sends a bad chunk size is not a server error",
    async () => {
      await exchange(target, `${SUBMIT_HEAD}Content-Length: 100\r\n\r\n{"kind":`, {
        hangUp: true,
      });
      const badChunk = await exchange(
        target,
        `${SUBMIT_HEAD}Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`,
      );
      // The runtime answers the framing error itself, before the application.
      expect(badChunk.received).toStartWith("HTTP/1.1 400");
      // Both are counted once the handler saw the abort: as 499, never as 5xx.
      aborted += 2;
      const metrics = await eventually(
        async () => {
          const text = await metricsText();
          const count = /route="\/v1\/workloads",status="499"} (\d+)/.exec(text)?.[1];
          return Number(count ?? 0) >= aborted ? text : null;
        },
        { what: `${aborted} client aborts counted as 499`, timeoutMs: 5000 },
      );
      expect(serverErrorLines(metrics)).toEqual([]);
      expect(daemon.log()).not.toContain("request failed");
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "a body that stops arriving is cut with 408 after the body timeout, and the connection closed",
    async () => {
      const stalled = await exchange(target, `${SUBMIT_HEAD}Content-Length: 100\r\n\r\n{"a":`);
      expect(stalled.closed).toBe(true);
      expect(stalled.received).toStartWith("HTTP/1.1 408");
      expect(stalled.received).toContain("REQUEST_TIMEOUT");
      expect(stalled.elapsedMs).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 50);
      expect(stalled.elapsedMs).toBeLessThan(BODY_TIMEOUT_MS + 5000);
      const chunked = await exchange(
        target,
        `${SUBMIT_HEAD}Transfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n`,
      );
      expect(chunked.closed).toBe(true);
      expect(chunked.received).toStartWith("HTTP/1.1 408");
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "a declared body that the route never reads does not keep the connection",
    async () => {
      const res = await exchange(
        target,
        'GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{"a":',
        { waitMs: 5000 },
      );
      expect(res.received).toStartWith("HTTP/1.1 200");
      expect(res.closed).toBe(true);
    },
    TEST_TIMEOUT_MS,
  );
});

test(
  "held connections do not pile up: twenty stalled bodies leave no descriptor behind",
  async () => {
    const before = openFds();
    const stalled = await Promise.all(
      Array.from({ length: 20 }, () =>
        exchange("unix", `${SUBMIT_HEAD}Content-Length: 100\r\n\r\n{"a":`),
      ),
    );
    expect(stalled.every((s) => s.closed)).toBe(true);
    await eventually(() => openFds() <= before + 2, { what: `fds back to about ${before}` });
  },
  TEST_TIMEOUT_MS,
);

test(
  "HEAD on a log, and a GET of a log cancelled early, leave no file handle open",
  async () => {
    const submitted = await daemon.cli(
      "submit",
      "--json",
      "--",
      "sh",
      "-c",
      "seq 1 300000", // about 2 MB: more than one read chunk
    );
    expect(submitted.code).toBe(0);
    const id = (JSON.parse(submitted.stdout) as { id: string }).id;
    await eventually(async () => (await daemon.show(id)).phase === "COMPLETED", {
      what: "the job completed",
    });
    const logPath = `/v1/workloads/${id}/logs`;
    // Leaked handles are closed by the garbage collector some seconds later: the count is
    // taken at once, with only the time a prompt close needs.
    const settled = (before: number, what: string) =>
      eventually(() => openFds() <= before + 2, {
        what: `${what}: the daemon's descriptors back to about ${before}`,
        timeoutMs: 1000,
      });
    const beforeHead = openFds();
    let peak = beforeHead;
    for (let i = 0; i < 20; i++) {
      const head = await exchange(
        "unix",
        `HEAD ${logPath} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
      );
      expect(head.received).toStartWith("HTTP/1.1 200");
      peak = Math.max(peak, openFds());
    }
    // A leaked handle lives until the next garbage collection (well under a second here),
    // so the peak, not the count at the end, shows it; and the collection says so on stderr.
    expect(peak - beforeHead).toBeLessThanOrEqual(3);
    await settled(beforeHead, "after 20 HEADs");
    const beforeGet = openFds();
    for (let i = 0; i < 20; i++) {
      // Read the first bytes of the log, then go away.
      await new Promise<void>((resolve) => {
        const socket = createConnection({ path: daemon.socket });
        socket.on("connect", () =>
          socket.write(`GET ${logPath} HTTP/1.1\r\nHost: localhost\r\n\r\n`),
        );
        socket.once("data", () => {
          socket.destroy();
          resolve();
        });
        socket.on("error", () => resolve());
      });
    }
    await settled(beforeGet, "after 20 cancelled GETs");
    expect(daemon.log()).not.toContain("closed during garbage collection");
  },
  TEST_TIMEOUT_MS,
);

test(
  "--listen adds TCP beside the unix socket: the CLI and backup keep working on the socket",
  async () => {
    expect((await daemon.cli("list")).code).toBe(0);
    const dest = `${daemon.dir}/copy.db`;
    const backup = await daemon.cli("backup", dest);
    expect(backup.stderr).toBe("");
    expect(backup.code).toBe(0);
    expect(await Bun.file(dest).exists()).toBe(true);
    // And the TCP listener answers too, with the token.
    const res = await fetch(`http://127.0.0.1:${port}/v1/profiles`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
  },
  TEST_TIMEOUT_MS,
);

test(
  "over TCP /healthz answers liveness without the token and without data; nothing else does",
  async () => {
    const base = `http://127.0.0.1:${port}`;
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    expect((await fetch(`${base}/healthz`, { method: "HEAD" })).status).toBe(200);
    for (const path of ["/metrics", "/v1/diagnostics", "/v1/profiles", "/openapi.json"]) {
      expect({ path, status: (await fetch(`${base}${path}`)).status }).toEqual({
        path,
        status: 401,
      });
    }
    expect((await fetch(`${base}/healthz`, { method: "POST" })).status).toBe(401);
  },
  TEST_TIMEOUT_MS,
);

test.each([
  ["GET / HTTP/9.9\r\n\r\n", "505"],
  ["GET /a b HTTP/1.1\r\nHost: localhost\r\n\r\n", "505"],
  ["GARBAGE\r\n\r\n", "400"],
  ["GET /healthz HTTP/1.1\r\nBad Header: x\r\n\r\n", "400"],
  ["GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n", "400"],
])(
  "the runtime answers %p itself with a bare %s and closes, as docs/api.md says",
  async (raw, status) => {
    const res = await exchange("unix", raw);
    expect(res.closed).toBe(true);
    expect(res.received).toBe(
      `HTTP/1.1 ${status} ${status === "505" ? "HTTP Version Not Supported" : "Bad Request"}\r\nConnection: close\r\n\r\n`,
    );
  },
  TEST_TIMEOUT_MS,
);
