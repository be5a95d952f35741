/**
 * run_code: a cell in the session's kernel through the session service, as the native exec
 * does. What the kernel says becomes MCP content: stdout and stderr as text, an image/png
 * as image content, text/html and text/plain as text; an exception (or the cell's own
 * timeout) is an error result with its traceback. Each output is also a progress
 * notification while the cell runs, and a client's notifications/cancelled interrupts the
 * cell (KeyboardInterrupt, escalated to a kernel restart as the interrupt route does).
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type * as v from "valibot";
import type { ExecOk, ExecOutput, MimeBundle } from "../../../core/session/session-port.ts";
import { mustBeLiveSession, sessionFailure } from "../workloads/live-session.ts";
import { ownedWorkload, type ToolContext } from "./tool-context.ts";
import type { RunCodeArgs } from "./tool-schemas.ts";

type Content = CallToolResult["content"][number];

/** The progress message's share of an output: a status line, not the output itself. */
const PROGRESS_TEXT_MAX = 200;

function bundleContent(data: MimeBundle): Content[] {
  const out: Content[] = [];
  const png = data["image/png"];
  if (png !== undefined)
    out.push({ type: "image", data: png.replace(/\s+/g, ""), mimeType: "image/png" });
  const html = data["text/html"];
  if (html !== undefined) out.push({ type: "text", text: html });
  const plain = data["text/plain"];
  if (plain !== undefined) out.push({ type: "text", text: plain });
  return out;
}

/** Adjacent stream text of one name is one text item, stderr marked as such. */
export function execContent(outputs: readonly ExecOutput[]): Content[] {
  const out: Content[] = [];
  let stream: { name: "stdout" | "stderr"; text: string } | null = null;
  const flush = () => {
    if (stream === null) return;
    out.push({
      type: "text",
      text: stream.name === "stderr" ? `[stderr]\n${stream.text}` : stream.text,
    });
    stream = null;
  };
  for (const o of outputs) {
    if (o.type === "stream") {
      if (stream !== null && stream.name === o.name) stream.text += o.text;
      else {
        flush();
        stream = { name: o.name, text: o.text };
      }
      continue;
    }
    flush();
    if (o.type === "error")
      out.push({ type: "text", text: `${o.ename}: ${o.evalue}\n${o.traceback}` });
    else out.push(...bundleContent(o.data));
  }
  flush();
  return out;
}

function progressLine(o: ExecOutput): string {
  switch (o.type) {
    case "stream":
      return `${o.name}: ${o.text.slice(0, PROGRESS_TEXT_MAX)}`;
    case "error":
      return `error: ${o.ename}`;
    default:
      return `${o.type}: ${Object.keys(o.data).join(", ")}`;
  }
}

function answer(outcome: ExecOk): CallToolResult {
  const content = execContent(outcome.outputs);
  if (outcome.kernelRestarted) {
    content.unshift({
      type: "text",
      text: "[the kernel had died: this ran in a fresh one, every earlier variable is gone]",
    });
  }
  if (content.length === 0) content.push({ type: "text", text: "" });
  return { content, ...(outcome.status === "ERROR" ? { isError: true } : {}) };
}

export async function runCodeTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof RunCodeArgs>,
): Promise<CallToolResult> {
  const { deps } = ctx;
  const { workload, sessions } = mustBeLiveSession(deps, ownedWorkload(ctx, args.session));
  // An attempt to run code is a present user, whether or not the kernel is ready yet, and
  // stays one while the cell runs (core/session/presence.ts).
  const present = deps.presence.whileRunning(workload.id);
  let step = 0;
  let started = false;
  const interrupt = () => {
    if (!started) return;
    void sessions.interrupt(workload.id).then(
      (outcome) =>
        deps.log.info("cell cancelled by the MCP client", {
          workloadId: workload.id,
          outcome: outcome.kind,
          door: "mcp",
        }),
      (error) =>
        deps.log.warn("interrupt after cancellation failed", {
          workloadId: workload.id,
          error: String(error),
        }),
    );
  };
  const running = sessions.exec(workload.id, args.code, {
    ...(args.timeoutSeconds === undefined ? {} : { timeoutSeconds: args.timeoutSeconds }),
    ...(args.maxOutputChars === undefined ? {} : { maxOutputChars: args.maxOutputChars }),
    onStart: () => {
      started = true;
      // Cancelled while the cell was being handed over: interrupted once it is running.
      if (ctx.signal.aborted) interrupt();
    },
    onOutput: (output) => {
      step += 1;
      void ctx.progress(step, progressLine(output)).catch(() => {});
    },
    onKernel: (message) => {
      step += 1;
      void ctx.progress(step, `kernel restarting: ${message}`).catch(() => {});
    },
  });
  ctx.signal.addEventListener("abort", interrupt, { once: true });
  try {
    const outcome = await running;
    if (outcome.kind !== "Ok") sessionFailure(workload, outcome);
    return answer(outcome);
  } finally {
    ctx.signal.removeEventListener("abort", interrupt);
    present();
  }
}
