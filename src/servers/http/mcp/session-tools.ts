/**
 * The session tools: profiles, start (waiting for READY with progress), stop, interrupt,
 * kernel restart. run_code is in run-code.ts.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type * as v from "valibot";
import { getWorkload } from "../../../adapters/store-sqlite/index.ts";
import { isTerminal } from "../../../core/models.ts";
import { pause } from "../../../lib/clock.ts";
import { conflict } from "../problem.ts";
import { listProfiles } from "../profiles/routes.ts";
import type { WorkloadView } from "../views.ts";
import { mustBeLiveSession, sessionFailure } from "../workloads/live-session.ts";
import { jsonResult, ownedWorkload, type ToolContext } from "./tool-context.ts";
import {
  type SessionArgs,
  START_WAIT_DEFAULT_SECONDS,
  type StartSessionArgs,
} from "./tool-schemas.ts";
import { admit, stop, viewOf } from "./workload-ops.ts";

/** How often start_session looks at the session while waiting (the CLI's `wait` does too). */
const READY_POLL_MS = 500;

export async function listProfilesTool(ctx: ToolContext): Promise<CallToolResult> {
  return jsonResult(await listProfiles(ctx.deps, ctx.caller));
}

function readiness(view: WorkloadView): string {
  const ready = view.conditions.find((c) => c.type === "READY");
  const parts = [`${view.id} ${view.phase}`];
  if (ready)
    parts.push(`READY=${ready.status}${ready.status === "TRUE" ? "" : ` (${ready.reason})`}`);
  if (view.message) parts.push(view.message);
  return parts.join(" ");
}

const isReady = (view: WorkloadView) =>
  !isTerminal(view.phase) && view.conditions.some((c) => c.type === "READY" && c.status === "TRUE");

export async function startSessionTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof StartSessionArgs>,
): Promise<CallToolResult> {
  const { wait, waitSeconds, idempotency_key, ...fields } = args;
  const { workload, replayed } = await admit(
    ctx,
    { kind: "SESSION", ...fields },
    idempotency_key ?? null,
  );
  if (wait === false) {
    return jsonResult({
      session: workload.id,
      replayed,
      ready: false,
      workload: viewOf(ctx, workload),
    });
  }
  const deadlineMs = ctx.deps.clock.now() + (waitSeconds ?? START_WAIT_DEFAULT_SECONDS) * 1000;
  let view = viewOf(ctx, workload);
  let step = 0;
  let said = "";
  while (!isReady(view) && !isTerminal(view.phase) && ctx.deps.clock.now() < deadlineMs) {
    const line = readiness(view);
    if (line !== said) {
      step += 1;
      said = line;
      await ctx.progress(step, line);
    }
    await pause(READY_POLL_MS, ctx.signal);
    // A client that cancelled the wait leaves the session starting: stop_session ends it.
    if (ctx.signal.aborted) break;
    view = viewOf(ctx, getWorkload(ctx.deps.store, workload.id) ?? workload);
  }
  if (isTerminal(view.phase)) {
    return {
      isError: true,
      content: [
        {
          type: "text",
          text: `session ${view.id} ended before it was READY: ${view.phase} ${view.reason ?? ""}${view.message ? `: ${view.message}` : ""}${view.hint ? ` (${view.hint})` : ""}`,
        },
        { type: "text", text: JSON.stringify(view) },
      ],
    };
  }
  const ready = isReady(view);
  return jsonResult({
    session: view.id,
    replayed,
    ready,
    ...(ready
      ? {}
      : {
          note: `not READY yet (${readiness(view)}); call job_status, or start_session again with the same idempotency_key to wait on`,
        }),
    workload: view,
  });
}

export async function stopSessionTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof SessionArgs>,
): Promise<CallToolResult> {
  const workload = ownedWorkload(ctx, args.session);
  if (workload.kind !== "SESSION") {
    throw conflict(
      "not-a-session",
      "Not a session",
      `workload ${workload.id} is a ${workload.kind}, not a SESSION (use cancel)`,
    );
  }
  return jsonResult(stop(ctx, workload));
}

export async function interruptTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof SessionArgs>,
): Promise<CallToolResult> {
  const { workload, sessions } = mustBeLiveSession(ctx.deps, ownedWorkload(ctx, args.session));
  const outcome = await sessions.interrupt(workload.id);
  if (outcome.kind !== "Ok") sessionFailure(workload, outcome);
  ctx.deps.log.info("interrupt requested", {
    workloadId: workload.id,
    interrupted: outcome.interrupted,
    door: "mcp",
  });
  return jsonResult({ interrupted: outcome.interrupted });
}

export async function restartKernelTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof SessionArgs>,
): Promise<CallToolResult> {
  const { workload, sessions } = mustBeLiveSession(ctx.deps, ownedWorkload(ctx, args.session));
  const outcome = await sessions.restart(workload.id);
  if (outcome.kind !== "Ok") sessionFailure(workload, outcome);
  ctx.deps.log.info("kernel restart requested", {
    workloadId: workload.id,
    running: outcome.running,
    door: "mcp",
  });
  return jsonResult({ running: outcome.running, message: outcome.message });
}
