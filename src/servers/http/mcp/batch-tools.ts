/**
 * The batch tools: submit_batch (exactly once per idempotency_key, INV-8 through this
 * door too), job_status, job_logs and cancel; job_status and cancel take sessions too.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type * as v from "valibot";
import { listAllocations } from "../../../adapters/store-sqlite/index.ts";
import { openLog, tailOffset } from "../workloads/log-stream.ts";
import { chooseAttempt, elementIndex, followTarget, logNotFound } from "../workloads/logs.ts";
import { jsonResult, ownedWorkload, type ToolContext } from "./tool-context.ts";
import type { JobLogsArgs, SubmitBatchArgs, WorkloadArgs } from "./tool-schemas.ts";
import { admit, stop, viewOf } from "./workload-ops.ts";

/** The most of a log one answer carries: its end, when the log is longer. */
export const LOG_ANSWER_MAX_BYTES = 256 * 1024;

export async function submitBatchTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof SubmitBatchArgs>,
): Promise<CallToolResult> {
  const { idempotency_key, ...fields } = args;
  const { workload, replayed } = await admit(ctx, { kind: "BATCH", ...fields }, idempotency_key);
  return jsonResult({ workload: workload.id, replayed, status: viewOf(ctx, workload) });
}

export async function jobStatusTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof WorkloadArgs>,
): Promise<CallToolResult> {
  return jsonResult(viewOf(ctx, ownedWorkload(ctx, args.workload)));
}

export async function cancelTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof WorkloadArgs>,
): Promise<CallToolResult> {
  return jsonResult(stop(ctx, ownedWorkload(ctx, args.workload)));
}

/** The log's text (its last LOG_ANSWER_MAX_BYTES at most) by the logs route's own rules. */
export async function readLog(
  ctx: ToolContext,
  args: v.InferOutput<typeof JobLogsArgs>,
): Promise<{ readonly text: string; readonly skippedBytes: number }> {
  const workload = ownedWorkload(ctx, args.workload);
  const id = workload.id;
  const stream = args.stream ?? "stdout";
  const attempt = chooseAttempt(listAllocations(ctx.deps.store, id), args.attempt);
  if (attempt === null) {
    throw logNotFound(
      args.attempt !== undefined
        ? `workload ${id} has no attempt ${args.attempt}`
        : `workload ${id} has no attempt yet (it is ${workload.phase}); call again once it runs`,
    );
  }
  const index = elementIndex(id, attempt, args.index);
  const path = followTarget(ctx.deps, workload, attempt, stream, index).path();
  const opened = path === null ? ({ kind: "Missing" } as const) : await openLog(path);
  if (opened.kind === "NotAFile") {
    throw logNotFound(`the ${stream} log of workload ${id} is not a regular file`);
  }
  if (opened.kind === "Missing") {
    throw logNotFound(
      `workload ${id} attempt ${attempt.epoch} has no ${stream} log (yet): it is written once the job starts`,
    );
  }
  const { handle, sizeBytes } = opened;
  try {
    const from = args.tail === undefined ? 0 : await tailOffset(handle, sizeBytes, args.tail);
    const start = Math.max(from, sizeBytes - LOG_ANSWER_MAX_BYTES);
    const buffer = Buffer.alloc(sizeBytes - start);
    const { bytesRead } = await handle.read(buffer, 0, buffer.byteLength, start);
    return { text: buffer.subarray(0, bytesRead).toString("utf8"), skippedBytes: start - from };
  } finally {
    await handle.close();
  }
}

export async function jobLogsTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof JobLogsArgs>,
): Promise<CallToolResult> {
  const { text, skippedBytes } = await readLog(ctx, args);
  const note =
    skippedBytes > 0
      ? `[the first ${skippedBytes} bytes are left out: an answer carries at most ${LOG_ANSWER_MAX_BYTES}; use tail, or GET /v1/workloads/${args.workload}/logs]\n`
      : "";
  return { content: [{ type: "text", text: `${note}${text}` }] };
}
