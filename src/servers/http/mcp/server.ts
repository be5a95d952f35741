/**
 * One MCP server per MCP session, for one caller: the tool table (tools.ts) and the
 * resources (resources.ts) on the SDK's low-level Server, so the argument schemas a client
 * sees are the valibot ones (as JSON Schema) and the checks run are those same schemas.
 * Every tools/call that may change something is written to the audit log like an HTTP
 * request: `MCP <tool>`, the workload, the status the HTTP API would have answered.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { toJsonSchema } from "@valibot/to-json-schema";
import type { Caller } from "../../../core/principals.ts";
import { VERSION } from "../../../lib/version.ts";
import type { ApiDeps } from "../deps.ts";
import { ApiError } from "../problem.ts";
import { listResources, RESOURCE_TEMPLATES, readResource } from "./resources.ts";
import type { ToolContext } from "./tool-context.ts";
import { asToolResult, parseArguments } from "./tool-results.ts";
import { TOOLS, type ToolSpec } from "./tools.ts";

/** The code the spec gives a resource that does not exist (or is another's). */
const RESOURCE_NOT_FOUND = -32002;

function inputSchema(spec: ToolSpec): { type: "object"; [key: string]: unknown } {
  const schema = toJsonSchema(spec.schema, { errorMode: "ignore", typeMode: "input" }) as Record<
    string,
    unknown
  >;
  delete schema["$schema"];
  return { ...schema, type: "object" };
}

const TOOL_LIST = TOOLS.map((spec) => ({
  name: spec.name,
  title: spec.title,
  description: spec.description,
  inputSchema: inputSchema(spec),
  annotations: spec.annotations,
}));
const BY_NAME: ReadonlyMap<string, ToolSpec> = new Map(TOOLS.map((t) => [t.name, t]));

export interface McpServerOptions {
  readonly deps: ApiDeps;
  readonly caller: Caller;
  /** The client's address for the audit log (`unix` on the socket). */
  readonly peer: string;
}

/** The status the HTTP API answers for a result: a problem's own, else 200. */
function statusOf(result: CallToolResult): number {
  if (result.isError !== true) return 200;
  const json = result.content.find((c, i) => i > 0 && c.type === "text");
  try {
    const status =
      json?.type === "text" ? (JSON.parse(json.text) as { status?: unknown }).status : undefined;
    return typeof status === "number" ? status : 422;
  } catch {
    return 422;
  }
}

export interface McpServerHandle {
  readonly server: Server;
  /** Tool calls running now. */
  readonly busy: () => number;
}

export function createMcpServer(options: McpServerOptions): McpServerHandle {
  const { deps, caller } = options;
  let inFlight = 0;
  const server = new Server(
    {
      name: "openai4s",
      title: "openai4s: sessions and batch jobs on this site's compute",
      version: VERSION,
    },
    {
      capabilities: { tools: { listChanged: false }, resources: { listChanged: false } },
      instructions:
        "Runs Python sessions and batch jobs on this site's compute. Start with list_profiles, then start_session and run_code, or submit_batch with an idempotency_key. Ids are workload ids (wl_...).",
    },
  );

  function context(
    extra: { signal: AbortSignal; sendNotification: (n: never) => Promise<void> },
    token: string | number | undefined,
  ): ToolContext {
    return {
      deps,
      caller,
      signal: extra.signal,
      progress: async (progress, message, total) => {
        if (token === undefined || extra.signal.aborted) return;
        await extra.sendNotification({
          method: "notifications/progress",
          params: {
            progressToken: token,
            progress,
            message,
            ...(total !== undefined ? { total } : {}),
          },
        } as never);
      },
    };
  }

  function audit(tool: string, workload: string | null, status: number): void {
    if (deps.audit === undefined) return;
    try {
      deps.audit.append({
        at: new Date(deps.clock.now()).toISOString(),
        principal: caller.kind === "Admin" ? "admin" : caller.name,
        tokenId: caller.kind === "Principal" ? caller.tokenId : null,
        action: `MCP ${tool}`,
        workload: workload === null ? null : workload.slice(0, 200),
        status,
        peer: options.peer,
      });
    } catch (error) {
      deps.log.error("audit log write failed", { error: String(error) });
    }
  }

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOL_LIST }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const spec = BY_NAME.get(request.params.name);
    if (spec === undefined) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown tool ${JSON.stringify(request.params.name.slice(0, 100))}; tools/list names them`,
      );
    }
    const args = parseArguments(spec.name, spec.schema, request.params.arguments);
    const ctx = context(extra as never, request.params._meta?.progressToken);
    let result: CallToolResult;
    inFlight += 1;
    try {
      result = await asToolResult(() => spec.handler(ctx, args as never));
    } catch (error) {
      deps.log.error("MCP tool failed", {
        tool: spec.name,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      });
      result = {
        isError: true,
        content: [
          { type: "text", text: "the daemon failed to handle this call; its log has the details" },
        ],
      };
    } finally {
      inFlight -= 1;
    }
    if (spec.annotations.readOnlyHint !== true) {
      const target = args as { workload?: unknown; session?: unknown };
      const named =
        typeof target.workload === "string"
          ? target.workload
          : typeof target.session === "string"
            ? target.session
            : null;
      audit(
        spec.name,
        named ?? createdId(result),
        result.isError === true ? statusOf(result) : 200,
      );
    }
    return result;
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: listResources(
      context(
        { signal: new AbortController().signal, sendNotification: async () => {} },
        undefined,
      ),
    ),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [...RESOURCE_TEMPLATES],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
    try {
      return await readResource(context(extra as never, undefined), request.params.uri);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const code = error.status === 404 ? RESOURCE_NOT_FOUND : ErrorCode.InvalidParams;
      throw new McpError(code, `${error.title}: ${error.detail}`, {
        uri: request.params.uri.slice(0, 300),
        reason: error.reason,
      });
    }
  });

  return { server, busy: () => inFlight };
}

/** The id a start_session or submit_batch answer names, for the audit entry. */
function createdId(result: CallToolResult): string | null {
  const first = result.content[0];
  if (first?.type !== "text") return null;
  const match = /"(?:session|workload)": "([^"]{1,200})"/.exec(first.text);
  return match?.[1] ?? null;
}
