/**
 * JupyterLab's client library under Node (v20, `ws` as its WebSocket), the way a Node front
 * end or a browser tab runs it, against the built daemon. Two things that worked only under
 * Bun before issue 30: the kernel start, whose JSON body Node's fetch types `text/plain`
 * (the daemon answered 415), and a forced `kernel.reconnect()` while a cell prints, after
 * which a stock Jupyter Server still delivers the gap's output and the execute_reply (the
 * daemon lost both, and JupyterLab showed the cell `[*]` forever).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, ROOT, startDaemon } from "../support/binary-daemon.ts";

const TIMEOUT_MS = 60_000;
const SCRIPT = join(ROOT, "test", "jupyter", "node-client", "reconnect-mid-cell.mjs");

function missingTools(): string | null {
  if (spawnSync("node", ["--version"]).status !== 0) return "node is not installed";
  const probe = spawnSync("/usr/bin/python3", ["-c", "import IPython, ipykernel"]);
  return probe.status === 0 ? null : "/usr/bin/python3 lacks IPython/ipykernel";
}

const missing = missingTools();
if (missing !== null) console.log(`skipping the Node client test: ${missing}`);

describe.skipIf(missing !== null)("@jupyterlab/services under Node against the daemon", () => {
  let d: Daemon;
  let base: string;
  let token: string;

  beforeAll(async () => {
    ensureBuilt();
    const port = await freePort();
    d = await startDaemon({
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    base = `http://127.0.0.1:${port}`;
    token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
  }, TIMEOUT_MS);

  afterAll(async () => {
    await d?.stop();
  }, 40_000);

  test(
    "starts a kernel with its default body type; a reconnect mid-cell keeps the cell's output and reply",
    async () => {
      const node = Bun.spawn(["node", SCRIPT, base, token], {
        cwd: ROOT,
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err] = await Promise.all([
        new Response(node.stdout).text(),
        new Response(node.stderr).text(),
      ]);
      await node.exited;
      const result = JSON.parse(out.trim().split("\n").at(-1) ?? "{}");
      if (result.error) console.log(result.error, err.slice(-2000));
      expect(result.started).toBe(true);
      expect(result.reconnected).toBe(true);
      expect(result.reply).toBe("ok");
      const lines = Array.from({ length: 8 }, (_, i) => `line ${i}\n`).join("");
      expect(result.stdout).toBe(lines);
    },
    TIMEOUT_MS,
  );
});
