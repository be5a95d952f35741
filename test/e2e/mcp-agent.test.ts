/**
 * An agent through the built binary's MCP door on the local backend (issue 31), with the
 * SDK's own client over both transports: Streamable HTTP at /mcp on a TCP listener with a
 * principal's token, and stdio through `openai4s mcp` on the socket.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  BINARY,
  type Daemon,
  ensureBuilt,
  freePort,
  startDaemon,
} from "../support/binary-daemon.ts";
import { call, playAgent, textOf } from "../support/mcp-agent.ts";

let d: Daemon;
let port: number;
let token: string;
const profiles = { session: "", batch: "" };

beforeAll(async () => {
  ensureBuilt();
  port = await freePort();
  d = await startDaemon({
    env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
    args: ["--listen", `127.0.0.1:${port}`],
  });
  expect((await d.cli("principal", "add", "alice")).code).toBe(0);
  const issued = await d.cli("token", "issue", "alice");
  expect(issued.code).toBe(0);
  token = issued.stdout.trim();
}, 180_000);

afterAll(async () => {
  await d?.stop();
});

async function pickProfiles(client: Client): Promise<void> {
  const listed = JSON.parse(textOf(await call(client, "list_profiles", {}))) as {
    profiles: { name: string; kinds: string[] }[];
  };
  profiles.session = listed.profiles.find((p) => p.kinds.includes("SESSION"))?.name ?? "";
  profiles.batch = listed.profiles.find((p) => p.kinds.includes("BATCH"))?.name ?? "";
  expect(profiles.session).not.toBe("");
  expect(profiles.batch).not.toBe("");
}

describe("an agent through MCP on the local backend", () => {
  test("over Streamable HTTP with a principal's token", async () => {
    const client = new Client({ name: "e2e-agent", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    try {
      await pickProfiles(client);
      const run = await playAgent(client, profiles, "http");
      console.log(
        `http: start progress ${run.startProgress}, cancel to idle ${run.cancelToIdleMs.toFixed(0)} ms`,
      );
      // The session is alice's, not the admin's; the audit log has the tool calls.
      const shown = (await d.show(run.sessionId)) as unknown as { owner: string | null };
      expect(shown.owner).toBe("alice");
      const audit = await d.cli("audit", "--json");
      expect(audit.stdout).toContain("MCP start_session");
    } finally {
      await client.close();
    }
  }, 600_000);

  test("over stdio through `openai4s mcp` on the socket", async () => {
    const client = new Client({ name: "e2e-agent-stdio", version: "1.0.0" });
    await client.connect(
      new StdioClientTransport({
        command: BINARY,
        args: ["mcp"],
        env: { OPENAI4S_SERVER: `unix:${d.socket}`, PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
        stderr: "inherit",
      }),
    );
    try {
      await pickProfiles(client);
      const run = await playAgent(client, profiles, "stdio");
      console.log(
        `stdio: start progress ${run.startProgress}, cancel to idle ${run.cancelToIdleMs.toFixed(0)} ms`,
      );
    } finally {
      await client.close();
    }
  }, 600_000);

  test("over stdio, a message over the bound is answered and dropped; the next one is served", async () => {
    const child = Bun.spawn([BINARY, "mcp"], {
      env: { OPENAI4S_SERVER: `unix:${d.socket}`, PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    try {
      // 3 MiB with no newline until its end, then a well-formed initialize.
      const huge = `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"${"x".repeat(3 << 20)}"}}\n`;
      child.stdin.write(huge);
      child.stdin.write(
        `${JSON.stringify({
          jsonrpc: "2.0",
          id: 2,
          method: "initialize",
          params: {
            protocolVersion: "2025-06-18",
            capabilities: {},
            clientInfo: { name: "raw", version: "1" },
          },
        })}\n`,
      );
      await child.stdin.flush();
      const answers: { id: unknown; error?: { message: string }; result?: unknown }[] = [];
      const reader = child.stdout.getReader();
      let buffered = "";
      while (answers.length < 2) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += new TextDecoder().decode(value);
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) if (line.trim() !== "") answers.push(JSON.parse(line));
      }
      expect(answers[0]?.id).toBeNull();
      expect(answers[0]?.error?.message).toContain(`${huge.length - 1} bytes is over`);
      expect(answers[1]?.id).toBe(2);
      expect(answers[1]?.result).toHaveProperty("protocolVersion");
    } finally {
      child.stdin.end();
      await child.exited;
    }
  }, 60_000);
});
