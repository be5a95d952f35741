/**
 * What a hostile web page can make a real browser (Debian's headless chromium) do to the
 * daemon, through (a) a TCP forward of the unix socket as `ssh -L 8080:api.sock` gives (the
 * socket needs no token, so neither does its forward) and (b) the TCP listener:
 *
 * - a cross-site page's no-cors POST with a Blob body (and a text/plain one) to submit a job;
 * - a cross-site websocket to a live kernel's /api/kernels/{id}/channels that runs code;
 * - DNS rebinding: a page whose own name now resolves to 127.0.0.1 (chromium's
 *   --host-resolver-rules plays the DNS; the page is served before the "rebinding" by a
 *   route), reading /v1/workloads and minting a principal's token same-origin.
 *
 * Nothing is created (no workload, no principal, no marker file a job or cell would write)
 * and nothing is read. A baseline through the same forward from a client that is no browser
 * proves the forward, the kernel and the job would have worked.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Socket, TCPSocketListener } from "bun";
import type { Browser, Page } from "playwright-core";
import { chromium } from "playwright-core";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import { freePort } from "../support/binary-daemon.ts";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CHROMIUM = existsSync("/usr/bin/chromium") ? "/usr/bin/chromium" : null;
const IPYKERNEL = Bun.spawnSync(["/usr/bin/python3", "-c", "import ipykernel"]).exitCode === 0;
if (CHROMIUM === null || !IPYKERNEL) {
  console.warn("skipped the browser attack test: needs /usr/bin/chromium and python3-ipykernel");
}

/** A TCP port piped to the unix socket, byte for byte, as `ssh -L PORT:SOCKET` does. */
function forwardToSocket(
  socketPath: string,
): TCPSocketListener<{ peer: Socket | null; held: Uint8Array[] }> {
  return Bun.listen<{ peer: Socket | null; held: Uint8Array[] }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        client.data = { peer: null, held: [] };
        void Bun.connect({
          unix: socketPath,
          socket: {
            open(upstream) {
              client.data.peer = upstream;
              for (const chunk of client.data.held.splice(0)) upstream.write(chunk);
            },
            data(_upstream, chunk) {
              client.write(chunk);
            },
            close() {
              client.end();
            },
            error() {
              client.end();
            },
          },
        });
      },
      data(client, chunk) {
        const copy = new Uint8Array(chunk);
        if (client.data.peer === null) client.data.held.push(copy);
        else client.data.peer.write(copy);
      },
      close(client) {
        client.data.peer?.end();
      },
    },
  });
}

function executeRequest(code: string): string {
  return JSON.stringify({
    channel: "shell",
    header: {
      msg_id: crypto.randomUUID(),
      msg_type: "execute_request",
      session: "attacker",
      username: "x",
      version: "5.3",
      date: new Date().toISOString(),
    },
    parent_header: {},
    metadata: {},
    content: {
      code,
      silent: false,
      store_history: false,
      user_expressions: {},
      allow_stdin: false,
    },
    buffers: [],
  });
}

/** The attacker's page: every attack at once, reporting what it saw. */
function attackPage(target: string, jobJson: string, kernelId: string, cell: string): string {
  return `<!doctype html><meta charset="utf-8"><title>cute cats</title><script>
window.attack = async () => {
  const seen = { posts: [], socket: "never opened", reads: [] };
  const job = ${JSON.stringify(jobJson)};
  for (const body of [new Blob([job]), job, new Blob([job], { type: "text/plain" })]) {
    try {
      await fetch(${JSON.stringify(target)} + "/v1/workloads", { method: "POST", mode: "no-cors", body });
      seen.posts.push("sent");
    } catch (e) { seen.posts.push("failed " + e); }
  }
  seen.socket = await new Promise((resolve) => {
    const ws = new WebSocket(${JSON.stringify(target.replace(/^http/, "ws"))} + "/api/kernels/${kernelId}/channels");
    const timer = setTimeout(() => resolve("no answer"), 8000);
    ws.onopen = () => ws.send(${JSON.stringify(cell)});
    ws.onmessage = (m) => { if (String(m.data).includes("execute_reply")) { clearTimeout(timer); resolve("ran code"); } };
    ws.onerror = () => { clearTimeout(timer); resolve("refused"); };
  });
  return seen;
};
</script>`;
}

/** The rebinding page: same-origin (its name now points at the daemon), so it may read. */
const REBOUND_PAGE = `<!doctype html><meta charset="utf-8"><title>rebound</title><script>
window.attack = async () => {
  const reads = [];
  const list = await fetch("/v1/workloads");
  reads.push(list.status + " " + (await list.text()).slice(0, 200));
  const add = await fetch("/v1/principals", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "mallory" }) });
  reads.push(add.status + " " + (await add.text()).slice(0, 200));
  const token = await fetch("/v1/principals/mallory/tokens", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  reads.push(token.status + " " + (await token.text()).slice(0, 200));
  return reads;
};
</script>`;

describe.skipIf(CHROMIUM === null || !IPYKERNEL)("a hostile page in headless chromium", () => {
  let dir: string;
  let daemon: RunningDaemon;
  let forward: ReturnType<typeof forwardToSocket>;
  let browser: Browser;
  let socketPath: string;
  let kernelId: string;
  let tcpPort: number;

  async function admin(path: string, init: RequestInit = {}): Promise<Response> {
    return await fetch(`http://localhost${path}`, {
      ...init,
      unix: socketPath,
      headers: { "content-type": "application/json", ...init.headers },
    } as RequestInit);
  }

  async function workloadNames(): Promise<string[]> {
    const body = (await (await admin("/v1/workloads")).json()) as {
      items: { name: string | null }[];
    };
    return body.items.map((w) => w.name ?? "");
  }

  /** A cell run from a client that is no browser (no Origin): what it printed. */
  async function runCell(url: string, code: string): Promise<string> {
    const ws = new WebSocket(url);
    let printed = "";
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => ws.send(executeRequest(code));
      ws.onmessage = (m) => {
        const msg = JSON.parse(String(m.data)) as {
          header: { msg_type: string };
          content: { name?: string; text?: string };
        };
        if (msg.header.msg_type === "stream") printed += msg.content.text ?? "";
        if (msg.header.msg_type === "execute_reply") resolve();
      };
      ws.onerror = () => reject(new Error("baseline websocket failed"));
    });
    ws.close();
    return printed;
  }

  /** What the attacker's cells would have left in the kernel. */
  const PWNED = 'print(sorted(k for k in globals() if k.startswith("pwned")))';

  beforeAll(async () => {
    dir = makeTempDir("o4s-browser-attacks-");
    const stateDir = join(dir, "state");
    socketPath = join(stateDir, "api.sock");
    tcpPort = await freePort();
    const config = localDaemonConfig(stateDir, {
      listen: [
        { kind: "unix", path: socketPath },
        { kind: "tcp", host: "127.0.0.1", port: tcpPort },
      ],
    });
    daemon = await startedDaemon({
      ...config,
      env: {
        ...config.env,
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}`,
        OPENAI4S_WORKER_LISTEN: `127.0.0.1:${await freePort()}`,
      },
    });
    forward = forwardToSocket(socketPath);
    const started = await admin("/api/kernels", {
      method: "POST",
      body: JSON.stringify({ name: "python3" }),
    });
    expect(started.status).toBe(201);
    kernelId = ((await started.json()) as { id: string }).id;
    // The baseline: a cell through the forward, from a client that sends no Origin.
    const channels = `ws://127.0.0.1:${forward.port}/api/kernels/${kernelId}/channels`;
    await eventually(
      async () => {
        try {
          return (await runCell(channels, "print(6 * 7)")).includes("42");
        } catch {
          return false;
        }
      },
      { what: "the kernel runs a cell through the forward", timeoutMs: 60_000, intervalMs: 500 },
    );
    browser = await chromium.launch({
      executablePath: CHROMIUM ?? "",
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        // Chromium's Local Network Access prompt (denied when headless) would stop these
        // pages before the daemon sees them; Firefox and Safari have no such prompt, and a
        // user may click Allow. The daemon must refuse on its own.
        "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,BlockInsecurePrivateNetworkRequests",
        // The DNS of a rebinding attack, already switched: the attacker's name is 127.0.0.1.
        "--host-resolver-rules=MAP rebind.attacker.test 127.0.0.1, MAP *.attacker.test 127.0.0.1",
      ],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    forward?.stop(true);
    await daemon?.stop();
    if (dir) removeDir(dir);
  }, 60_000);

  /** A page at `pageUrl` served by the attacker (a route: before any rebinding). */
  async function attackerPage(pageUrl: string, html: string): Promise<Page> {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.route(pageUrl, (route) =>
      route.fulfill({ status: 200, contentType: "text/html", body: html }),
    );
    await page.goto(pageUrl);
    return page;
  }

  for (const via of ["the socket's forward", "the TCP listener"] as const) {
    test(`through ${via}: the no-cors POST creates nothing, the cross-site websocket runs nothing`, async () => {
      const port = via === "the TCP listener" ? tcpPort : forward.port;
      const target = `http://127.0.0.1:${port}`;
      const tag = via === "the TCP listener" ? "tcp" : "forward";
      const job = JSON.stringify({
        kind: "BATCH",
        name: `pwned-${tag}`,
        profile: "default",
        command: ["true"],
      });
      const page = await attackerPage(
        "http://cats.attacker.test/",
        attackPage(target, job, kernelId, executeRequest(`pwned_${tag} = True`)),
      );
      const seen = (await page.evaluate("window.attack()")) as { posts: string[]; socket: string };
      await page.context().close();
      // The no-cors requests left the browser (opaque answers), and were refused.
      expect(seen.posts).toEqual(["sent", "sent", "sent"]);
      expect(seen.socket).toBe("refused");
      const names = await workloadNames();
      expect(names.filter((n) => n.startsWith("pwned"))).toEqual([]);
      const channels = `ws://127.0.0.1:${forward.port}/api/kernels/${kernelId}/channels`;
      expect(await runCell(channels, PWNED)).toBe("[]\n");
    }, 60_000);
  }

  test("a rebinding-shaped Host reads nothing and mints no token, through the forward and TCP", async () => {
    for (const port of [forward.port, tcpPort]) {
      const page = await attackerPage(`http://rebind.attacker.test:${port}/`, REBOUND_PAGE);
      const reads = (await page.evaluate("window.attack()")) as string[];
      await page.context().close();
      expect(reads.map((r) => r.slice(0, 3))).toEqual(["403", "403", "403"]);
      for (const read of reads) expect(read).toContain("HOST_REFUSED");
    }
    const principals = (await (await admin("/v1/principals")).json()) as {
      items: { name: string }[];
    };
    expect(principals.items.map((p) => p.name)).not.toContain("mallory");
  }, 60_000);
});
