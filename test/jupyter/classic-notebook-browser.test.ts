/**
 * Debian's classic Jupyter Notebook (`jupyter-notebook`, notebook 6) in gateway mode with
 * the built daemon as its gateway and a principal's token, driven by headless Chromium
 * (playwright-core): a notebook's cells run from the page with Shift+Enter, state kept from
 * one to the next, and a cell whose websocket is cut while it runs (the page's own
 * `kernel.ws.close()`, which the notebook answers by reconnecting as after a network blip)
 * still gets what it printed during the gap and its execute_reply: its prompt number set,
 * no `[*]` left, its output whole. Notebook 6's gateway client names no `session_id` to
 * the gateway; the browser's session is in the header of what it sends.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { chromium } from "playwright-core";
import {
  type Daemon,
  ensureBuilt,
  freePort,
  killProcessesMentioning,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 90_000;
const NOTEBOOK = "/usr/bin/jupyter-notebook";
const CHROMIUM = Bun.which("chromium");

function missingParts(): string | null {
  if (CHROMIUM === null) return "chromium is not installed (apt-get install chromium)";
  if (!existsSync(NOTEBOOK)) return `${NOTEBOOK} is absent (apt-get install jupyter-notebook)`;
  return null;
}

const missing = missingParts();
// CI installs both: there a missing part is a failure, not a skip.
const skip = missing !== null && process.env["CI"] !== "true";
if (skip) console.log(`skipping the classic Notebook browser test: ${missing}`);

/** The cell that waits, while its websocket is cut, for the file this test then writes. */
const GAP_CELL = [
  "import os, time",
  "print('before', flush=True)",
  "while not os.path.exists('cut-seen'):",
  "    time.sleep(0.02)",
  "print('during', flush=True)",
  "print('after')",
  "x + 1",
].join("\n");

const CELLS = ["x = 41", "print(x + 1)", GAP_CELL, "print(x * 2)"];

function notebookJson(): string {
  const cell = (source: string) => ({
    cell_type: "code",
    metadata: {},
    outputs: [],
    execution_count: null,
    source,
  });
  return JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: "python3", display_name: "Python 3", language: "python" } },
    cells: CELLS.map(cell),
  });
}

interface CellView {
  readonly prompt: string;
  readonly text: string;
}

/** What the page shows of cell `i`: its input prompt (`In [3]:`, `In [*]:`) and output. */
async function cellView(page: Page, i: number): Promise<CellView> {
  const cell = page.locator(".cell").nth(i);
  return {
    prompt: ((await cell.locator(".input_prompt").textContent()) ?? "").replace(/\s+/g, ""),
    text: (await cell.locator(".output_subarea").allTextContents()).join(""),
  };
}

/** Runs cell `i` as a user does: click into it, Shift+Enter. */
async function runCell(page: Page, i: number): Promise<void> {
  await page.locator(".cell").nth(i).locator(".CodeMirror").click();
  await page.keyboard.press("Shift+Enter");
}

/** Waits until cell `i` has a prompt number (its execute_reply came) and returns it. */
async function finished(page: Page, i: number, timeoutMs = 20_000): Promise<CellView> {
  return await eventually(
    async () => {
      const view = await cellView(page, i);
      if (/^In\[\d+\]:$/.test(view.prompt)) return view;
      throw new Error(`cell ${i} shows ${JSON.stringify(view)}`);
    },
    { what: `cell ${i} to finish`, timeoutMs },
  );
}

describe.skipIf(skip)("the classic Notebook in gateway mode, in headless Chromium", () => {
  let d: Daemon;
  let server: ReturnType<typeof Bun.spawn>;
  let browser: Browser;
  let launched: Promise<Browser> | undefined;
  let daemonUrl: string;
  let principal: string;
  let notebookUrl: string;
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    ensureBuilt();
    // Chromium starts while the daemon and the Notebook do (seconds each).
    launched = chromium.launch({
      executablePath: CHROMIUM ?? "",
      headless: true,
      // Root in CI: chromium's own sandbox needs an unprivileged user namespace.
      args: ["--no-sandbox", "--disable-dev-shm-usage"],
    });
    launched.catch(() => {}); // awaited below; a failure there, not as an unhandled rejection
    const port = await freePort();
    daemonUrl = `http://127.0.0.1:${port}`;
    d = await startDaemon({
      // Debian's python3 (with ipykernel) is the kernel's.
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    expect((await d.cli("principal", "add", "scientist")).code).toBe(0);
    const issued = await d.cli("token", "issue", "scientist");
    expect(issued.code).toBe(0);
    principal = issued.stdout.trim();

    const home = join(d.dir, "notebook-home");
    const notebooks = join(d.dir, "notebooks");
    mkdirSync(home);
    mkdirSync(notebooks);
    writeFileSync(join(notebooks, "cells.ipynb"), notebookJson());
    const jupyterPort = await freePort();
    const jupyterToken = "notebook-test-token";
    server = Bun.spawn(
      [
        NOTEBOOK,
        "--no-browser",
        // Tests run as root, which the Notebook refuses unless told.
        "--allow-root",
        "--ip=127.0.0.1",
        `--port=${jupyterPort}`,
        `--NotebookApp.token=${jupyterToken}`,
        `--notebook-dir=${notebooks}`,
        `--gateway-url=${daemonUrl}`,
        `--GatewayClient.auth_token=${principal}`,
        "--GatewayClient.request_timeout=120",
      ],
      {
        env: { PATH: "/usr/bin:/bin", HOME: home, JUPYTER_CONFIG_DIR: join(home, ".jupyter") },
        cwd: home,
        stdout: "ignore",
        stderr: "pipe",
      },
    );
    const jupyterBase = `http://127.0.0.1:${jupyterPort}`;
    await eventually(
      async () => {
        if (server.exitCode !== null) {
          const stderr = await new Response(server.stderr as ReadableStream).text();
          throw new Error(`jupyter-notebook exited: ${stderr.slice(-2000)}`);
        }
        try {
          return (await fetch(`${jupyterBase}/api`)).ok;
        } catch {
          return false;
        }
      },
      { what: "jupyter-notebook answering", timeoutMs: 30_000 },
    );
    notebookUrl = `${jupyterBase}/notebooks/cells.ipynb?token=${jupyterToken}`;
    browser = await launched;
  }, TIMEOUT_MS);

  afterAll(async () => {
    // Launched even when what followed failed: closed all the same.
    await (await launched?.catch(() => undefined))?.close();
    server?.kill();
    await server?.exited;
    if (d) killProcessesMentioning(d.dir);
    await d?.stop();
  }, 40_000);

  test(
    "cells run from the page; a cell whose websocket is cut mid-cell ends with its output and reply",
    async () => {
      const page = await browser.newPage();
      page.on("pageerror", (e) => consoleErrors.push(e.message));
      await page.goto(notebookUrl);
      // The notebook has started its kernel through the gateway and its channels are open.
      const kernelId = await eventually(
        async () =>
          (await page.evaluate(
            "Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected() && Jupyter.notebook.kernel.info_reply ? Jupyter.notebook.kernel.id : null",
          )) as string | null,
        { what: "the notebook's kernel connected", timeoutMs: 60_000 },
      );
      const workload = `w-${kernelId.slice(2).replaceAll("-", "")}`;
      const asPrincipal = { Authorization: `token ${principal}` };
      // The kernel is the principal's session (the token the Notebook was given).
      const kernel = await fetch(`${daemonUrl}/api/kernels/${kernelId}`, { headers: asPrincipal });
      expect(kernel.status).toBe(200);
      expect((await d.show(workload)).kind).toBe("SESSION");

      await runCell(page, 0);
      await finished(page, 0);
      await runCell(page, 1);
      expect((await finished(page, 1)).text).toBe("42\n");

      await runCell(page, 2);
      await eventually(async () => (await cellView(page, 2)).text.includes("before"), {
        what: "the gap cell's first line",
      });
      expect((await cellView(page, 2)).prompt).toBe("In[*]:");
      // The cut: the page's kernel websocket closes as on a network blip; the Notebook
      // reconnects by itself a second later. Once the daemon has seen the close (no
      // websocket left on the kernel), the cell prints and ends inside the gap.
      await page.evaluate("Jupyter.notebook.kernel.ws.close()");
      await eventually(
        async () => {
          const r = await fetch(`${daemonUrl}/api/kernels/${kernelId}`, { headers: asPrincipal });
          return ((await r.json()) as { connections: number }).connections === 0;
        },
        { what: "the daemon to see the websocket gone" },
      );
      const flag = await fetch(`${daemonUrl}/api/contents/${workload}/cut-seen`, {
        method: "PUT",
        headers: { ...asPrincipal, "Content-Type": "application/json" },
        body: JSON.stringify({ type: "file", format: "text", content: "" }),
      });
      expect(flag.status).toBeLessThan(300);

      const gap = await finished(page, 2);
      expect(gap.prompt).toBe("In[3]:");
      expect(gap.text).toBe("before\nduring\nafter\n42");
      // The kernel goes on after the reconnect.
      await runCell(page, 3);
      expect(await finished(page, 3)).toEqual({ prompt: "In[4]:", text: "82\n" });
      expect(consoleErrors).toEqual([]);
      await page.close();
    },
    TIMEOUT_MS,
  );
});
