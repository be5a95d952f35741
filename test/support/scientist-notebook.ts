/**
 * The scientist's notebook (test/fixtures/scientist.ipynb, issue 30) run end to end by
 * nbclient directly against a daemon's Jupyter server API with a principal's token, as the
 * local and the Slurm tests do: test/fixtures/nbclient-direct.py uploads observations.csv
 * through /api/contents, runs every cell, and leaves the kernel running; here the files the
 * notebook wrote are read back through /api/contents, each cell's outputs are checked, and
 * the kernel is shut down.
 */
import { expect } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./binary-daemon.ts";

export const PYTHON = "/usr/bin/python3";
const FIXTURES = join(ROOT, "test", "fixtures");

/** Why this machine cannot run the notebook (null: it can), for describe.skipIf. */
export function scientistNotebookMissing(): string | null {
  const modules = "nbclient, nbformat, jupyter_server, websocket, numpy, pandas, matplotlib";
  const probe = spawnSync(PYTHON, ["-c", `import ${modules}`]);
  return probe.status === 0
    ? null
    : `${PYTHON} lacks one of ${modules} (apt-get install python3-nbclient python3-jupyter-server python3-pandas python3-matplotlib)`;
}

/** Four weeks of daily temperatures; the notebook reads them as observations.csv. */
export const OBSERVATIONS_CSV = [
  "day,temperature",
  ...Array.from(
    { length: 28 },
    (_, day) => `${day},${Number((10 + (day % 7) * 1.5 + day / 10).toFixed(2))}`,
  ),
  "",
].join("\n");

/** What the notebook writes from them: each week's min, max and mean (pandas' to_csv). */
export const WEEKLY_SUMMARY_CSV = [
  "week,min,max,mean",
  "0,10.0,19.6,14.8",
  "1,10.7,20.3,15.5",
  "2,11.4,21.0,16.2",
  "3,12.1,21.7,16.9",
  "",
].join("\n");

/** What the 10 MB cell prints: 100,000 lines of 100 characters. */
function tenMegabytes(): string {
  const tail = `${"y".repeat(91)}\n`;
  const lines: string[] = [];
  for (let i = 0; i < 100_000; i++) lines.push(`${String(i).padStart(7, "0")} ${tail}`);
  return lines.join("");
}

interface Output {
  readonly output_type: string;
  readonly name?: string;
  readonly text?: string | string[];
  readonly data?: Record<string, string | string[]>;
  readonly ename?: string;
  readonly evalue?: string;
}

interface Cell {
  readonly cell_type: string;
  readonly id: string;
  readonly outputs?: readonly Output[];
  readonly metadata: { readonly execution?: Record<string, string> };
}

const joined = (text: string | string[] | undefined): string =>
  Array.isArray(text) ? text.join("") : (text ?? "");

/** A cell's stdout, its stream outputs in order. */
function stdoutOf(cell: Cell): string {
  return (cell.outputs ?? [])
    .filter((o) => o.output_type === "stream" && o.name === "stdout")
    .map((o) => joined(o.text))
    .join("");
}

export interface NotebookServer {
  /** `http://HOST:PORT` of the daemon's TCP listener. */
  readonly url: string;
  /** A principal's token (not the admin's). */
  readonly token: string;
  /** The kernelspec: a session profile's name. */
  readonly kernel: string;
  /** A private directory for the token file and the executed notebook. */
  readonly dir: string;
}

export interface NotebookRun {
  readonly wallMs: number;
  readonly kernelId: string;
  /** The session's directory in the contents root: its workload id. */
  readonly directory: string;
}

async function contentsText(server: NotebookServer, path: string): Promise<string> {
  const r = await fetch(`${server.url}/api/contents/${path}?content=1&type=file&format=text`, {
    headers: { Authorization: `token ${server.token}` },
  });
  expect(r.status, `GET /api/contents/${path}`).toBe(200);
  const model = (await r.json()) as { format: string; content: string };
  expect(model.format).toBe("text");
  return model.content;
}

/**
 * Runs the notebook through nbclient, checks each cell's outputs and the files it wrote,
 * and shuts the kernel down. Throws (a failed expectation) naming what was wrong.
 */
export async function runScientistNotebook(server: NotebookServer): Promise<NotebookRun> {
  const tokenFile = join(server.dir, "principal.token");
  writeFileSync(tokenFile, `${server.token}\n`, { mode: 0o600 });
  const observations = join(server.dir, "observations.csv");
  writeFileSync(observations, OBSERVATIONS_CSV);
  const executed = join(server.dir, "scientist.executed.ipynb");
  const startedMs = performance.now();
  const helper = Bun.spawn(
    [
      PYTHON,
      join(FIXTURES, "nbclient-direct.py"),
      "--server",
      server.url,
      "--token-file",
      tokenFile,
      "--kernel",
      server.kernel,
      "--notebook",
      join(FIXTURES, "scientist.ipynb"),
      "--executed",
      executed,
      "--upload",
      `${observations}=observations.csv`,
    ],
    {
      // HOME: jupyter_core's runtime files go to the test's dir, not the user's.
      env: { PATH: "/usr/bin:/bin", HOME: server.dir },
      cwd: server.dir,
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  const [stdout, stderr, code] = await Promise.all([
    new Response(helper.stdout).text(),
    new Response(helper.stderr).text(),
    helper.exited,
  ]);
  const wallMs = performance.now() - startedMs;
  const printed = stdout.trim().split("\n").at(-1) ?? "";
  const { kernelId, directory } = (printed.startsWith("{") ? JSON.parse(printed) : {}) as {
    kernelId?: string;
    directory?: string;
  };
  try {
    expect(code, `nbclient-direct.py failed:\n${stderr.slice(-4000)}`).toBe(0);
    const nb = JSON.parse(readFileSync(executed, "utf8")) as { cells: Cell[] };
    checkOutputs(nb);
    const dir = directory ?? "";
    expect(await contentsText(server, `${dir}/weekly-summary.csv`)).toBe(WEEKLY_SUMMARY_CSV);
    const bigCell = nb.cells.find((c) => c.id === "cell-6") as Cell;
    const named = /the whole output is in (openai4s-outputs\/\S+-stdout\.txt)\]/.exec(
      stdoutOf(bigCell),
    )?.[1];
    expect(named, "the truncation line names the output file").toBeDefined();
    const whole = await contentsText(server, `${dir}/${named}`);
    // Compared by length and by value: a mismatch in 10 MB is not printed whole.
    const expected = tenMegabytes();
    expect(whole.length).toBe(expected.length);
    expect(whole === expected, "the output file holds the cell's whole output").toBe(true);
  } finally {
    if (kernelId !== undefined) {
      const r = await fetch(`${server.url}/api/kernels/${kernelId}`, {
        method: "DELETE",
        headers: { Authorization: `token ${server.token}` },
      });
      expect(r.status).toBe(204);
    }
  }
  return { wallMs, kernelId: kernelId ?? "", directory: directory ?? "" };
}

function checkOutputs(nb: { cells: Cell[] }): void {
  const cell = (id: string): Cell => {
    const found = nb.cells.find((c) => c.id === id);
    if (found === undefined) throw new Error(`the executed notebook has no ${id}`);
    const errors = (found.outputs ?? []).filter((o) => o.output_type === "error");
    expect(errors.map((e) => `${e.ename}: ${e.evalue}`)).toEqual([]);
    return found;
  };
  // numpy and pandas.
  expect(stdoutOf(cell("cell-1"))).toBe("fit 3.000 2.000 rows 50 sum 3775\n");
  // The uploaded file, read with pandas: a DataFrame shown as HTML and text.
  const weekly = (cell("cell-2").outputs ?? []).find((o) => o.output_type === "execute_result");
  expect(joined(weekly?.data?.["text/plain"])).toContain("3     12.1  21.7  16.9");
  expect(joined(weekly?.data?.["text/html"])).toContain("<table");
  expect(stdoutOf(cell("cell-3"))).toBe("wrote 4 weeks\n");
  // The figure, displayed: a real PNG.
  const figure = (cell("cell-4").outputs ?? []).find((o) => o.output_type === "display_data");
  const png = Buffer.from(joined(figure?.data?.["image/png"]), "base64");
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  expect(png.length).toBeGreaterThan(5_000);
  // A process pool: the work ran in other processes.
  expect(stdoutOf(cell("cell-5"))).toBe("sum of squares 328350\nran in other processes True\n");
  // 10 MB printed: the head and the tail reach the notebook, with the lines naming the file.
  const big = stdoutOf(cell("cell-6"));
  expect(big.startsWith(`0000000 ${"y".repeat(91)}\n`)).toBe(true);
  expect(big.endsWith(`0099999 ${"y".repeat(91)}\n`)).toBe(true);
  expect(big).toContain("[... output over 100000 characters; the whole output goes to");
  expect(big.length).toBeLessThan(250_000);
  // The 90 s cell: every progress line, and 90 s between its start and its reply.
  const long = cell("cell-7");
  const progress = Array.from({ length: 18 }, (_, i) => `progress ${(i + 1) * 5} s\n`).join("");
  expect(stdoutOf(long)).toBe(`${progress}slept 90 s\n`);
  const timing = long.metadata.execution ?? {};
  const seconds =
    (Date.parse(timing["shell.execute_reply"] ?? "") -
      Date.parse(timing["iopub.execute_input"] ?? "")) /
    1000;
  expect(seconds).toBeGreaterThanOrEqual(90);
}
