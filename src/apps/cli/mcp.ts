/**
 * `openai4s mcp`: the MCP server for an agent on the login node, on stdio. It holds no tool
 * of its own: each JSON-RPC message is carried to the daemon's /mcp (over its socket, or
 * TCP with --token-file, as every client command connects) and each answer back, so the
 * tools exist once, in the daemon, under the daemon's ownership rules and audit log.
 * Progress and cancellation pass through as the messages they are.
 */

import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Command } from "../../lib/command/command.ts";
import type { ServerAddress } from "./api-client.ts";
import { boundedLines } from "./bounded-lines.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  resolveServer,
  resolveToken,
  systemRuntime,
} from "./client.ts";

const HELP = `Usage: openai4s mcp [--server ADDR] [--token-file FILE]

Serve the Model Context Protocol on stdin/stdout for an agent on this machine: its tools
(start_session, run_code, submit_batch, ...) act as the caller, through the daemon's /mcp.
Add it to an agent as a stdio server whose command is \`openai4s mcp\` (docs/agents.md).
Nothing but protocol messages is written to stdout; diagnostics go to stderr.
${CLIENT_OPTIONS_HELP}`;

/** The JSON-RPC error an agent gets for a request the daemon never answered. */
const UNREACHABLE = -32000;
/** JSON-RPC's "Invalid Request": what a message over the size bound is answered with. */
const INVALID_REQUEST = -32600;
/** One message on stdin, at most: the daemon's own body cap, so nothing is carried in vain. */
export const STDIO_MESSAGE_MAX_BYTES = 1024 * 1024;

function mcpUrl(server: ServerAddress): URL {
  // Over a unix socket the host part is a formality; the path is what routes.
  return new URL(server.kind === "unix" ? "http://localhost/mcp" : `${server.baseUrl}/mcp`);
}

export function createMcpCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "mcp",
    summary: "Serve MCP on stdio for an agent (through the daemon's /mcp)",
    help: HELP,
    options: {},
    async run({ values, positionals, io }) {
      if (positionals.length > 0) {
        io.stderr(`mcp: unexpected argument ${JSON.stringify(positionals[0])}\n`);
        return 2;
      }
      const server = resolveServer(values.server, io.env, runtime);
      const token = await resolveToken(values["token-file"], io.env, runtime);
      const upstream = new StreamableHTTPClientTransport(mcpUrl(server), {
        fetch: (url, init) => {
          const headers = new Headers(init?.headers);
          if (token !== null) headers.set("Authorization", `Bearer ${token}`);
          return runtime.fetch(String(url), {
            ...init,
            headers,
            ...(server.kind === "unix" ? { unix: server.path } : {}),
          });
        },
      });
      const warn = (line: string) => io.stderr(`${line}\n`);
      const input = boundedLines(STDIO_MESSAGE_MAX_BYTES, (lineBytes) => {
        warn(`mcp: a message of ${lineBytes} bytes was dropped: over ${STDIO_MESSAGE_MAX_BYTES}`);
        // Its id is unread (the line was never held whole): JSON-RPC's null id says so.
        void stdio.send({
          jsonrpc: "2.0",
          id: null,
          error: {
            code: INVALID_REQUEST,
            message: `a message of ${lineBytes} bytes is over the ${STDIO_MESSAGE_MAX_BYTES}-byte limit; write large files over HTTP (docs/agents.md)`,
          },
        } as unknown as JSONRPCMessage);
      });
      process.stdin.pipe(input);
      const stdio = new StdioServerTransport(input, process.stdout);
      return await relay(stdio, upstream, warn);
    },
  });
}

/** Until stdin ends: every message across, the MCP session ended at the daemon after. */
async function relay(
  stdio: StdioServerTransport,
  upstream: StreamableHTTPClientTransport,
  warn: (line: string) => void,
): Promise<number> {
  const answerUnreachable = (message: JSONRPCMessage, error: unknown) => {
    warn(`mcp: the daemon did not take a message: ${String(error)}`);
    if (!isJSONRPCRequest(message)) return;
    void stdio.send({
      jsonrpc: "2.0",
      id: message.id,
      error: { code: UNREACHABLE, message: `openai4s daemon: ${String(error)}` },
    });
  };
  stdio.onmessage = (message) => {
    upstream.send(message).catch((error: unknown) => answerUnreachable(message, error));
  };
  upstream.onmessage = (message) => {
    // The version the daemon agreed to goes on every later request (the spec's header).
    const result = (message as { result?: { protocolVersion?: unknown } }).result;
    if (typeof result?.protocolVersion === "string")
      upstream.setProtocolVersion(result.protocolVersion);
    void stdio.send(message);
  };
  upstream.onerror = (error) => warn(`mcp: ${error.message}`);
  stdio.onerror = (error) => warn(`mcp: stdin: ${error.message}`);
  await upstream.start();
  await stdio.start();
  await new Promise<void>((resolve) => {
    process.stdin.once("end", resolve);
    process.stdin.once("close", resolve);
  });
  await upstream.terminateSession().catch(() => {});
  await upstream.close().catch(() => {});
  await stdio.close().catch(() => {});
  return 0;
}

export const mcpCommand = createMcpCommand();
