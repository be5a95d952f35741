/**
 * A stock Jupyter Server (Debian's python3-jupyter-server) uses the built daemon as its
 * gateway, started by the very command docs/sessions.md shows (the blocks marked
 * `tested: test/jupyter/jupyter-server-gateway.test.ts`, run here as written); a notebook's
 * cells then run through that server: state kept from one cell to the next, a matplotlib
 * figure drawn. The client is JupyterLab's library, talking to the Jupyter Server only.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KernelManager, type KernelMessage, ServerConnection } from "@jupyterlab/services";
import {
  type Daemon,
  ensureBuilt,
  freePort,
  killProcessesMentioning,
  ROOT,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 60_000;
const MARKER = "<!-- tested: test/jupyter/jupyter-server-gateway.test.ts runs this block -->";

/** The shell blocks of docs/sessions.md marked as run by this test, in order. */
export function testedBlocks(markdown: string): readonly string[] {
  const blocks: string[] = [];
  const pattern =
    /<!-- tested: test\/jupyter\/jupyter-server-gateway\.test\.ts runs this block -->\s*\n```sh\n([\s\S]*?)\n```/g;
  for (const match of markdown.matchAll(pattern)) blocks.push(match[1] ?? "");
  return blocks;
}

function missingModules(): string | null {
  const probe = spawnSync("/usr/bin/python3", ["-c", "import jupyter_server, ipykernel"]);
  return probe.status === 0
    ? null
    : "/usr/bin/python3 lacks jupyter_server/ipykernel (apt-get install python3-jupyter-server python3-ipykernel)";
}

const missing = missingModules();
if (missing !== null) console.log(`skipping the Jupyter Server gateway test: ${missing}`);

describe.skipIf(missing !== null)("a stock Jupyter Server with the daemon as its gateway", () => {
  let d: Daemon;
  let server: ReturnType<typeof Bun.spawn>;
  let env: Record<string, string>;
  const blocks = testedBlocks(readFileSync(join(ROOT, "docs", "sessions.md"), "utf8"));

  beforeAll(async () => {
    ensureBuilt();
    const port = await freePort();
    d = await startDaemon({
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    const home = join(d.dir, "jupyter-home");
    mkdirSync(home);
    // Tests run as root, which Jupyter Server refuses unless told; the docs' command stays
    // the one a user types, the permission comes from this test's own config dir.
    const config = join(d.dir, "jupyter-config");
    mkdirSync(config);
    writeFileSync(join(config, "jupyter_server_config.py"), "c.ServerApp.allow_root = True\n");
    env = {
      PATH: "/usr/bin:/bin",
      HOME: home,
      JUPYTER_CONFIG_DIR: config,
      OPENAI4S_URL: `http://127.0.0.1:${port}`,
      OPENAI4S_TOKEN_FILE: join(d.stateDir, "admin-token"),
      JUPYTER_PORT: String(await freePort()),
      JUPYTER_TOKEN: "jupyter-test-token",
    };
    // The docs' command, with `d.dir` in its command line so teardown finds what it left.
    server = Bun.spawn(["bash", "-c", `${blocks[0] ?? "false"}\n`, d.dir], {
      env,
      cwd: home,
      stdout: "ignore",
      stderr: "pipe",
    });
    await eventually(
      async () => {
        if (server.exitCode !== null) {
          const stderr = await new Response(server.stderr as ReadableStream).text();
          throw new Error(`jupyter_server exited: ${stderr.slice(-2000)}`);
        }
        try {
          return (await fetch(`http://127.0.0.1:${env["JUPYTER_PORT"]}/api`)).ok;
        } catch {
          return false;
        }
      },
      { timeoutMs: 30_000 },
    );
  }, TIMEOUT_MS);

  afterAll(async () => {
    server?.kill();
    await server?.exited;
    if (d) killProcessesMentioning(d.dir);
    await d?.stop();
  }, 40_000);

  test("docs/sessions.md has the two blocks this test runs", () => {
    expect(blocks.length).toBe(2);
    expect(blocks[0]).toContain("--gateway-url");
    expect(MARKER).toContain("jupyter-server-gateway");
  });

  test("the server's kernelspecs are the daemon's profiles (the docs' curl)", () => {
    const r = spawnSync("bash", ["-c", blocks[1] ?? "false"], { env, encoding: "utf8" });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('"display_name": "Python (default)"');
  });

  test(
    "a notebook's cells run through the server: state kept, a figure drawn",
    async () => {
      const settings = ServerConnection.makeSettings({
        baseUrl: `http://127.0.0.1:${env["JUPYTER_PORT"]}/`,
        wsUrl: `ws://127.0.0.1:${env["JUPYTER_PORT"]}/`,
        token: env["JUPYTER_TOKEN"] ?? "",
        appendToken: true,
      });
      const kernels = new KernelManager({ serverSettings: settings });
      // What a notebook names its kernel: the default profile's.
      const kernel = await kernels.startNew({ name: "python3" });
      const cells = ["x = 20", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nx * 2 + 2"];
      const outputs: KernelMessage.IIOPubMessage[][] = [];
      for (const code of cells) {
        const iopub: KernelMessage.IIOPubMessage[] = [];
        const future = kernel.requestExecute({ code });
        future.onIOPub = (msg) => {
          iopub.push(msg);
        };
        const reply = await future.done;
        expect(reply.content.status).toBe("ok");
        outputs.push(iopub);
      }
      const second = outputs[1] ?? [];
      const result = second.find((m) => m.header.msg_type === "execute_result");
      expect((result?.content as { data?: Record<string, string> })?.data?.["text/plain"]).toBe(
        "42",
      );
      const figure = second.find(
        (m) =>
          m.header.msg_type === "display_data" &&
          "image/png" in ((m.content as { data?: object }).data ?? {}),
      );
      expect(figure).toBeDefined();
      // The daemon sees it as a session of its own.
      const workloadId = `w-${kernel.id.slice(2).replaceAll("-", "")}`;
      expect((await d.show(workloadId)).kind).toBe("SESSION");
      await kernel.shutdown();
      kernels.dispose();
    },
    TIMEOUT_MS,
  );

  test("nbconvert --execute runs a notebook through the server (its messages carry no channel)", async () => {
    // jupyter_server 1.23's kernel client sends no token on the websocket, so the server
    // nbconvert talks to is a personal one without a token, on 127.0.0.1 (the docs' note).
    const port = await freePort();
    // JUPYTER_TOKEN in the environment would set a token after all.
    const { JUPYTER_TOKEN: _, ...personalEnv } = env;
    const personal = Bun.spawn(
      [
        "/usr/bin/python3",
        "-m",
        "jupyter_server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        `--ServerApp.port=${port}`,
        "--ServerApp.token=",
        "--ServerApp.disable_check_xsrf=True",
        `--gateway-url=${env["OPENAI4S_URL"]}`,
        `--GatewayClient.auth_token=${readFileSync(env["OPENAI4S_TOKEN_FILE"] ?? "", "utf8").trim()}`,
        "--GatewayClient.request_timeout=120",
        d.dir,
      ],
      { env: personalEnv, cwd: d.dir, stdout: "ignore", stderr: "pipe" },
    );
    await eventually(
      async () => {
        try {
          return (await fetch(`http://127.0.0.1:${port}/api`)).ok;
        } catch {
          return false;
        }
      },
      { timeoutMs: 30_000 },
    );
    const notebook = join(d.dir, "nbconvert.ipynb");
    const cell = (source: string) => ({
      cell_type: "code",
      metadata: {},
      outputs: [],
      execution_count: null,
      source,
    });
    writeFileSync(
      notebook,
      JSON.stringify({
        nbformat: 4,
        nbformat_minor: 5,
        metadata: { kernelspec: { name: "python3", display_name: "Python 3", language: "python" } },
        cells: [cell("x = 40"), cell("print('sum', x + 2)")],
      }),
    );
    // Debian's python3-nbconvert has no `jupyter-nbconvert` launcher (that is another
    // package); `python3 -m nbconvert` is the same command.
    const r = spawnSync(
      "/usr/bin/python3",
      [
        "-m",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        "--ExecutePreprocessor.timeout=60",
        "--ExecutePreprocessor.kernel_manager_class=jupyter_server.gateway.managers.GatewayKernelManager",
        notebook,
      ],
      {
        env: { ...personalEnv, JUPYTER_GATEWAY_URL: `http://127.0.0.1:${port}` },
        cwd: d.dir,
        encoding: "utf8",
        timeout: 90_000,
      },
    );
    personal.kill();
    await personal.exited;
    if (r.status !== 0) {
      const server = await new Response(personal.stderr as ReadableStream).text();
      console.log(r.stderr.slice(-3000), server.slice(-3000));
    }
    expect(r.status).toBe(0);
    const out = JSON.parse(readFileSync(join(d.dir, "nbconvert.nbconvert.ipynb"), "utf8"));
    const printed = out.cells[1].outputs.map((o: { text?: string }) => o.text ?? "").join("");
    expect(printed).toBe("sum 42\n");
  }, 120_000);
});
