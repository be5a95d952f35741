/**
 * What a tool handler is given: the API's deps, who is calling, the request's cancellation,
 * a progress reporter (a no-op when the client asked for none) and the audit log. Plus the
 * ownership rule every tool applies to an id: another principal's workload is "not found",
 * in the same words as over HTTP.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { getWorkload } from "../../../adapters/store-sqlite/index.ts";
import type { Workload } from "../../../core/models.ts";
import { type Caller, mayUse } from "../../../core/principals.ts";
import type { ApiDeps } from "../deps.ts";
import { notFound } from "../problem.ts";

export interface ToolContext {
  readonly deps: ApiDeps;
  readonly caller: Caller;
  /** Aborted when the client sends notifications/cancelled for this call (or leaves). */
  readonly signal: AbortSignal;
  /** notifications/progress for this call; does nothing when it carried no progressToken. */
  readonly progress: (progress: number, message: string, total?: number) => Promise<void>;
}

export type ToolHandler = (ctx: ToolContext, args: never) => Promise<CallToolResult>;

/** The workload, when this caller may see it; else the HTTP API's 404, word for word. */
export function ownedWorkload(ctx: ToolContext, id: string): Workload {
  const workload = getWorkload(ctx.deps.store, id);
  if (workload === null || !mayUse(ctx.caller, workload.owner ?? null))
    throw notFound(`no workload ${JSON.stringify(id)}`);
  return workload;
}

export function textResult(text: string): CallToolResult {
  return { content: [{ type: "text", text }] };
}

export function jsonResult(value: unknown): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }] };
}
