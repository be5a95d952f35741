/**
 * JupyterLab's own client library talks to the built daemon as to a Jupyter Server, with a
 * principal's token and no gateway in between: SessionManager opens a notebook (a new kernel,
 * a SESSION), the kernel writes a file, and ContentsManager sees it in that session's
 * directory; a notebook saved there and reopened through SessionManager runs in the same
 * kernel, whose working directory holds it. The same ContentsManager runs under Node (with
 * `ws`), as JupyterLab's and VS Code's code does outside Bun.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  ContentsManager,
  type Kernel,
  KernelManager,
  type KernelMessage,
  ServerConnection,
  type Session,
  SessionManager,
} from "@jupyterlab/services";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 60_000;
const PYTHON = "/usr/bin/python3";
const missing =
  spawnSync(PYTHON, ["-c", "import IPython, ipykernel"]).status === 0
    ? null
    : `${PYTHON} lacks IPython/ipykernel (apt-get install python3-ipykernel)`;
if (missing !== null) console.log(`skipping the direct Jupyter server test: ${missing}`);

async function run(kernel: Kernel.IKernelConnection, code: string): Promise<string> {
  let text = "";
  const future = kernel.requestExecute({ code });
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === "stream") text += (msg.content as { text: string }).text;
    if (msg.header.msg_type === "error") text += `ERROR ${JSON.stringify(msg.content)}`;
  };
  const reply = (await future.done) as KernelMessage.IExecuteReplyMsg;
  expect(reply.content.status).toBe("ok");
  return text;
}

describe.skipIf(missing !== null)("a direct Jupyter server, through @jupyterlab/services", () => {
  let d: Daemon;
  let baseUrl: string;
  let token: string;
  let settings: ServerConnection.ISettings;
  let kernels: KernelManager;
  let sessions: SessionManager;
  let contents: ContentsManager;
  let first: Session.ISessionConnection;
  let dir: string;

  beforeAll(async () => {
    ensureBuilt();
    const port = await freePort();
    d = await startDaemon({
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    baseUrl = `http://127.0.0.1:${port}/`;
    const admin = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
    const asAdmin = (path: string, body: unknown) =>
      fetch(`${baseUrl}${path}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await asAdmin("v1/principals", { name: "alice" })).status).toBe(201);
    const issued = await asAdmin("v1/principals/alice/tokens", {});
    token = ((await issued.json()) as { token: string }).token;
    settings = ServerConnection.makeSettings({
      baseUrl,
      wsUrl: baseUrl.replace("http", "ws"),
      token,
      appendToken: true,
    });
    kernels = new KernelManager({ serverSettings: settings });
    sessions = new SessionManager({ serverSettings: settings, kernelManager: kernels });
    contents = new ContentsManager({ serverSettings: settings });
  }, TIMEOUT_MS);

  afterAll(async () => {
    sessions?.dispose();
    kernels?.dispose();
    await d?.stop();
  }, 40_000);

  test(
    "a notebook opened at the root starts a kernel whose files the contents show",
    async () => {
      first = await sessions.startNew({
        path: "scratch.ipynb",
        type: "notebook",
        name: "scratch",
        kernel: { name: "default" },
      });
      const kernel = first.kernel as Kernel.IKernelConnection;
      await kernel.info;
      await run(kernel, "open('made-by-kernel.txt', 'w').write('from the kernel\\n')");
      const root = await contents.get("");
      expect(root.content).toHaveLength(1);
      dir = (root.content as { path: string }[])[0]?.path as string;
      const listing = await contents.get(dir);
      expect((listing.content as { name: string }[]).map((m) => m.name)).toContain(
        "made-by-kernel.txt",
      );
      const file = await contents.get(`${dir}/made-by-kernel.txt`);
      expect(file.content).toBe("from the kernel\n");
    },
    TIMEOUT_MS,
  );

  test(
    "a notebook saved in the session's directory opens on the same kernel, which reads what was saved",
    async () => {
      await contents.save(`${dir}/data.csv`, { type: "file", format: "text", content: "x\n41\n" });
      const nb = await contents.newUntitled({ path: dir, type: "notebook" });
      expect(nb.path).toBe(`${dir}/Untitled.ipynb`);
      const renamed = await contents.rename(nb.path, `${dir}/analysis.ipynb`);
      expect(renamed.type).toBe("notebook");
      const opened = await sessions.startNew({
        path: renamed.path,
        type: "notebook",
        name: "analysis",
        kernel: { name: "default" },
      });
      expect(opened.kernel?.id).toBe(first.kernel?.id);
      const text = await run(
        opened.kernel as Kernel.IKernelConnection,
        "print(int(open('data.csv').read().split()[1]) + 1)",
      );
      expect(text).toBe("42\n");
      await sessions.refreshRunning();
      expect([...sessions.running()].map((s) => s.path).sort()).toEqual([
        "scratch.ipynb",
        `${dir}/analysis.ipynb`,
      ]);
      const checkpoint = await contents.createCheckpoint(renamed.path);
      expect((await contents.listCheckpoints(renamed.path)).map((c) => c.id)).toEqual([
        checkpoint.id,
      ]);
      const copy = await contents.copy(renamed.path, dir);
      expect(copy.path).toBe(`${dir}/analysis-Copy1.ipynb`);
      await contents.delete(copy.path);
    },
    TIMEOUT_MS,
  );

  test(
    "under Node with ws, the same ContentsManager reads and writes the workspace",
    () => {
      const node = spawnSync(
        "node",
        [join(import.meta.dir, "fixtures", "direct-node-client.mjs"), baseUrl, token, dir],
        {
          encoding: "utf8",
          timeout: 30_000,
          cwd: import.meta.dir,
        },
      );
      expect(node.stderr).toBe("");
      const seen = JSON.parse(node.stdout.trim().split("\n").pop() ?? "{}");
      expect(seen).toMatchObject({
        root: [dir],
        kernelFile: "from the kernel\n",
        saved: `${dir}/from-node.txt`,
        readBack: "node was here\n",
        checkpoint: "checkpoint",
        checkpoints: ["checkpoint"],
        afterDelete: 404,
      });
      expect(seen.listing).toContain("analysis.ipynb");
      expect(seen.sessions.sort()).toEqual(["scratch.ipynb", `${dir}/analysis.ipynb`]);
    },
    TIMEOUT_MS,
  );

  test(
    "a cell's output past the cap reaches the client with its tail, which comes before idle",
    async () => {
      // 300,000 characters, over the default cap of 200,000. The tail (the last 100,000)
      // went out after the kernel said idle: JupyterLab, which waits for the reply too, still
      // showed it, but nbclient ends a cell's output at idle and the notebook lost it.
      const line = (i: number) => `${String(i).padStart(4, "0")} ${"z".repeat(95)}\n`;
      const kernel = first.kernel as Kernel.IKernelConnection;
      let beforeIdle = "";
      let afterIdle = "";
      let idle = false;
      const future = kernel.requestExecute({
        code: "for i in range(3000):\n    print(f'{i:04d} ' + 'z' * 95)",
      });
      future.onIOPub = (msg) => {
        if (msg.header.msg_type === "status") {
          idle ||= (msg.content as { execution_state: string }).execution_state === "idle";
        }
        if (msg.header.msg_type === "stream") {
          const text = (msg.content as { text: string }).text;
          if (idle) afterIdle += text;
          else beforeIdle += text;
        }
      };
      expect((await future.done).content.status).toBe("ok");
      // Booleans and lengths: a failure does not print 200,000 characters.
      expect(afterIdle.length).toBe(0);
      expect(beforeIdle.startsWith(line(0))).toBe(true);
      expect(
        /\[\.\.\. \d+ more characters not shown; the whole output is in /.test(beforeIdle),
      ).toBe(true);
      expect(beforeIdle.endsWith(line(2999))).toBe(true);
      expect(beforeIdle.length).toBeLessThan(205_000);
    },
    TIMEOUT_MS,
  );

  test(
    "shutting the session down ends the kernel, and its directory leaves the root",
    async () => {
      await first.shutdown();
      await eventually(async () => ((await contents.get("")).content as unknown[]).length === 0, {
        what: "the ended session's directory to leave the root",
      });
      await sessions.refreshRunning();
      expect([...sessions.running()]).toEqual([]);
    },
    TIMEOUT_MS,
  );
});
