/**
 * The MCP door in process (issue 31): the SDK's own client over Streamable HTTP against the
 * API app. Authentication and ownership as over HTTP, argument errors as invalid params
 * naming the field, refusals as error results with the problem's words, exactly-once
 * submit_batch, bounded MCP sessions, Origin refused.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { getWorkload } from "../../src/adapters/store-sqlite/index.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { MCP_SESSIONS_PER_CALLER } from "../../src/servers/http/mcp/routes.ts";
import { type Harness, harness } from "../support/api-harness.ts";

const ADMIN_TOKEN = "admin-secret-token";
const TCP: Access = { kind: "Bearer", token: ADMIN_TOKEN };

const open: Harness[] = [];
const clients: Client[] = [];
function make(options: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness({ mintsAtAdmission: true, ...options });
  open.push(h);
  return h;
}
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => {});
  for (const h of open.splice(0)) h.close();
});

function tcpFetch(h: Harness, token: string | null, extra: Record<string, string> = {}) {
  return (url: string | URL, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    if (token !== null) headers.set("Authorization", `Bearer ${token}`);
    for (const [k, v] of Object.entries(extra)) headers.set(k, v);
    const u = new URL(String(url));
    return h.request(`${u.pathname}${u.search}`, { ...init, headers }, TCP);
  };
}

async function connect(h: Harness, token: string): Promise<Client> {
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp"), {
    fetch: tcpFetch(h, token),
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function principal(h: Harness, name: string): Promise<string> {
  const added = await h.post("/v1/principals", { name });
  expect(added.status).toBe(201);
  const issued = await h.request(
    `/v1/principals/${name}/tokens`,
    {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${ADMIN_TOKEN}` },
      body: "{}",
    },
    TCP,
  );
  expect(issued.status).toBe(201);
  return ((await issued.json()) as { token: string }).token;
}

const textOf = (r: unknown) =>
  ((r as { content?: { type: string; text?: string }[] }).content ?? [])
    .map((c) => c.text ?? "")
    .join("\n");

describe("the MCP door over Streamable HTTP", () => {
  test("no token: 401 with WWW-Authenticate, no MCP session made", async () => {
    const h = make();
    const response = await tcpFetch(h, null)("http://127.0.0.1/mcp", {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-11-25",
          capabilities: {},
          clientInfo: { name: "x", version: "1" },
        },
      }),
    });
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toContain("Bearer");
  });

  test("tools/list names every tool with schemas from the API's and truthful annotations", async () => {
    const h = make();
    const client = await connect(h, ADMIN_TOKEN);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        "cancel",
        "interrupt",
        "job_logs",
        "job_status",
        "list_files",
        "list_profiles",
        "read_file",
        "restart_kernel",
        "run_code",
        "start_session",
        "stop_session",
        "submit_batch",
        "write_file",
      ].sort(),
    );
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get("job_status")?.annotations?.readOnlyHint).toBe(true);
    expect(byName.get("cancel")?.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: true,
    });
    expect(byName.get("submit_batch")?.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true,
    });
    // The HTTP API's own limit, carried into the schema a model sees.
    const properties = byName.get("run_code")?.inputSchema.properties ?? {};
    const code = (properties as Record<string, { maxLength?: number }>).code;
    expect(code?.maxLength).toBe(512 * 1024);
    expect(byName.get("submit_batch")?.inputSchema.required).toEqual(
      expect.arrayContaining(["command", "profile", "idempotency_key"]),
    );
  });

  test("submit_batch asks for resources as the API does; over the profile's bound, its words", async () => {
    const h = make();
    const client = await connect(h, ADMIN_TOKEN);
    const asked = await client.callTool({
      name: "submit_batch",
      arguments: {
        command: ["true"],
        profile: "default",
        idempotency_key: "r1",
        resources: { cpus: 1 },
      },
    });
    expect(asked.isError).toBeUndefined();
    const id = (JSON.parse(textOf(asked)) as { workload: string }).workload;
    expect(getWorkload(h.store, id)?.spec.resources).toEqual({ cpus: 1 });
    const over = await client.callTool({
      name: "submit_batch",
      arguments: {
        command: ["true"],
        profile: "default",
        idempotency_key: "r2",
        resources: { cpus: 3 },
      },
    });
    expect(over.isError).toBe(true);
    expect(textOf(over)).toContain('profile "default" allows at most 2 CPUs per node (asked 3)');
  });

  test("malformed arguments: JSON-RPC invalid params naming the field", async () => {
    const h = make();
    const client = await connect(h, ADMIN_TOKEN);
    const error = await client
      .callTool({
        name: "submit_batch",
        arguments: { command: [], profile: "default", idempotency_key: "k1", bogus: 1 },
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((error as McpError).message).toContain("command: must not be empty");
    expect((error as McpError).message).toContain('unknown argument "bogus"');
    expect(h.rows().workloads).toBe(0);
  });

  test("a refusal is an error result with the problem's words; submit_batch is exactly once per key", async () => {
    const h = make();
    const client = await connect(h, ADMIN_TOKEN);
    const refused = await client.callTool({
      name: "submit_batch",
      arguments: { command: ["true"], profile: "nope", idempotency_key: "k0" },
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain("nope");
    const args = { command: ["echo", "hi"], profile: "default", idempotency_key: "retry-1" };
    const first = await client.callTool({ name: "submit_batch", arguments: args });
    expect(first.isError).toBeUndefined();
    const again = await client.callTool({ name: "submit_batch", arguments: args });
    const id = (JSON.parse(textOf(first)) as { workload: string }).workload;
    expect(JSON.parse(textOf(again)) as { workload: string; replayed: boolean }).toMatchObject({
      workload: id,
      replayed: true,
    });
    expect(h.rows().workloads).toBe(1);
  });

  test("another principal's workload is 'not found' word for word as over HTTP; its MCP session is unknown", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const aliceClient = await connect(h, alice);
    const submitted = await aliceClient.callTool({
      name: "submit_batch",
      arguments: { command: ["true"], profile: "default", idempotency_key: "a" },
    });
    const id = (JSON.parse(textOf(submitted)) as { workload: string }).workload;
    const overHttp = await tcpFetch(h, bob)(`http://127.0.0.1/v1/workloads/${id}`);
    expect(overHttp.status).toBe(404);
    const detail = ((await overHttp.json()) as { detail: string }).detail;
    const bobClient = await connect(h, bob);
    for (const name of ["job_status", "cancel", "job_logs", "list_files"]) {
      const r = await bobClient.callTool({ name, arguments: { workload: id } });
      expect(r.isError).toBe(true);
      expect(textOf(r)).toContain(detail);
    }
    const stop = await bobClient.callTool({ name: "stop_session", arguments: { session: id } });
    expect(textOf(stop)).toContain(detail);
    // Alice's workload is untouched, and Bob's cancel was audited as refused.
    const status = await aliceClient.callTool({ name: "job_status", arguments: { workload: id } });
    expect((JSON.parse(textOf(status)) as { phase: string }).phase).not.toBe("CANCELLED");
    // Bob presenting Alice's MCP session id: answered as an unknown session.
    const sessionId = (aliceClient.transport as StreamableHTTPClientTransport).sessionId ?? "";
    const hijack = await tcpFetch(h, bob, { "Mcp-Session-Id": sessionId })("http://127.0.0.1/mcp", {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2025-11-25",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
    });
    expect(hijack.status).toBe(404);
  });

  test("a page's Origin is refused (DNS rebinding), another local port's too; the own origin is not", async () => {
    const h = make();
    const init = (origin: string) => ({
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        Origin: origin,
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-11-25",
          capabilities: {},
          clientInfo: { name: "x", version: "1" },
        },
      }),
    });
    const evil = await tcpFetch(h, ADMIN_TOKEN)(
      "http://127.0.0.1/mcp",
      init("http://evil.example.com"),
    );
    expect(evil.status).toBe(403);
    // A page on another local port is another origin (the browser guard's rule, as Jupyter
    // Server's allow_origin); the daemon's own origin is the page it serves.
    const otherPort = await tcpFetch(h, ADMIN_TOKEN)(
      "http://127.0.0.1/mcp",
      init("http://localhost:8080"),
    );
    expect(otherPort.status).toBe(403);
    // (The harness asks as http://localhost.)
    const own = await tcpFetch(h, ADMIN_TOKEN)("http://127.0.0.1/mcp", init("http://localhost"));
    expect(own.status).toBe(200);
  });

  test("a message over the body cap is refused with 413, streamed or declared; the session goes on", async () => {
    const h = make();
    const transport = new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp"), {
      fetch: tcpFetch(h, ADMIN_TOKEN),
    });
    const client = new Client({ name: "test-agent", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    const sessionId = transport.sessionId ?? "";
    expect(sessionId).not.toBe("");
    // A tools/call whose code is 4 MiB: the API's 1 MiB body cap holds here too.
    const huge = JSON.stringify({
      jsonrpc: "2.0",
      id: 99,
      method: "tools/call",
      params: { name: "run_code", arguments: { session: "w-x", code: "#".repeat(4 << 20) } },
    });
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "Mcp-Session-Id": sessionId,
      "Mcp-Protocol-Version": "2025-06-18",
    };
    const bytes = new TextEncoder().encode(huge);
    // No Content-Length: the cap is counted as the bytes arrive, not trusted from a header.
    const streamed = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < bytes.length; at += 64 * 1024) {
          controller.enqueue(bytes.subarray(at, at + 64 * 1024));
        }
        controller.close();
      },
    });
    const send = tcpFetch(h, ADMIN_TOKEN);
    const chunked = await send("http://127.0.0.1/mcp", { method: "POST", headers, body: streamed });
    expect(chunked.status).toBe(413);
    const declared = await send("http://127.0.0.1/mcp", {
      method: "POST",
      headers: { ...headers, "Content-Length": String(bytes.length) },
      body: huge,
    });
    expect(declared.status).toBe(413);
    // The same MCP session still answers.
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain("run_code");
  });

  test("MCP sessions are bounded per caller: the idle least recently used one is closed", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const first = await connect(h, alice);
    const others: Client[] = [];
    for (let i = 1; i < MCP_SESSIONS_PER_CALLER; i++) {
      h.clock.advance(1000);
      others.push(await connect(h, alice));
    }
    h.clock.advance(1000);
    await first.listTools();
    // One more: room is made by closing alice's least recently used idle session, the
    // second one made (`first` was used since).
    await connect(h, alice);
    await first.listTools();
    const closed = await others[0]?.listTools().then(
      () => "open",
      (e: unknown) => String(e),
    );
    expect(closed).toContain("Session not found");
    await others[1]?.listTools();
    // The admin's sessions are counted apart.
    await connect(h, ADMIN_TOKEN);
  });
});
