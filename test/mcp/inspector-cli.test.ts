/**
 * The MCP Inspector's CLI mode (`@modelcontextprotocol/inspector --cli`), a client we did not
 * write, against the built binary (issue 31): over stdio through `openai4s mcp` on the
 * socket, and over Streamable HTTP at /mcp with a principal's token in its --header. It lists
 * the tools and calls them; a refusal comes back as a tool result with isError, not a crash.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  BINARY,
  type Daemon,
  ensureBuilt,
  freePort,
  ROOT,
  startDaemon,
} from "../support/binary-daemon.ts";

const INSPECTOR = join(ROOT, "node_modules", ".bin", "mcp-inspector");
const TOOLS = [
  "list_profiles",
  "start_session",
  "stop_session",
  "interrupt",
  "restart_kernel",
  "run_code",
  "write_file",
  "read_file",
  "list_files",
  "submit_batch",
  "job_status",
  "job_logs",
  "cancel",
];

let d: Daemon;
let port: number;
let token: string;

beforeAll(async () => {
  ensureBuilt();
  port = await freePort();
  d = await startDaemon({ args: ["--listen", `127.0.0.1:${port}`] });
  expect((await d.cli("principal", "add", "insp")).code).toBe(0);
  const issued = await d.cli("token", "issue", "insp");
  expect(issued.code).toBe(0);
  token = issued.stdout.trim();
}, 180_000);

afterAll(async () => {
  await d?.stop();
});

/** The Inspector's CLI, run by the machine's Node as a user would (`npx ... --cli`). */
async function inspector(args: readonly string[]): Promise<unknown> {
  const child = Bun.spawn(["node", INSPECTOR, "--cli", ...args], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: process.env["HOME"] ?? "/tmp",
      OPENAI4S_SERVER: `unix:${d.socket}`,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  if (code !== 0) throw new Error(`inspector exited ${code}: ${err}${out}`);
  return JSON.parse(out);
}

const http = () => [
  `http://127.0.0.1:${port}/mcp`,
  "--transport",
  "http",
  "--header",
  `Authorization: Bearer ${token}`,
];
const stdio = () => [BINARY, "mcp"];

describe("the MCP Inspector's CLI against the built binary", () => {
  test.each([
    ["stdio (openai4s mcp)", stdio],
    ["Streamable HTTP with a token", http],
  ])(
    "over %s: tools/list names every tool; list_profiles answers",
    async (_label, target) => {
      const listed = (await inspector([...target(), "--method", "tools/list"])) as {
        tools: { name: string }[];
      };
      expect(listed.tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort());
      const called = (await inspector([
        ...target(),
        "--method",
        "tools/call",
        "--tool-name",
        "list_profiles",
      ])) as { content: { type: string; text: string }[]; isError?: boolean };
      expect(called.isError ?? false).toBe(false);
      const profiles = JSON.parse(called.content[0]?.text ?? "{}") as { profiles: unknown[] };
      expect(profiles.profiles.length).toBeGreaterThan(0);
    },
    60_000,
  );

  test("over HTTP as a principal: another's or a missing workload is an error result naming it", async () => {
    const called = (await inspector([
      ...http(),
      "--method",
      "tools/call",
      "--tool-name",
      "job_status",
      "--tool-arg",
      "workload=w-nothing-here",
    ])) as { content: { text: string }[]; isError?: boolean };
    expect(called.isError).toBe(true);
    expect(called.content[0]?.text).toContain("w-nothing-here");
  }, 60_000);
});
