/**
 * What the worker does for each of the gateway's requests: run a cell, probe the workspace,
 * interrupt, a Jupyter message, input, restart. A new request kind is one case here.
 */
import { isAbsolute } from "node:path";
import type {
  CellEvent,
  ProbeWorkspaceResponse,
  WorkerRequest,
  WorkerResponse,
} from "../../wire/worker-protocol.ts";
import type { Kernel, KernelResult } from "./kernel.ts";

const PROBE_READ_BYTES = 4096;

export async function handle(
  request: WorkerRequest,
  kernel: Kernel,
  onEvent: (event: CellEvent) => void,
): Promise<WorkerResponse> {
  switch (request.kind) {
    case "exec": {
      const result = await kernel.exec(request.code, {
        onEvent,
        ...(request.cell !== undefined && { cell: request.cell }),
        ...(request.maxOutputChars !== undefined && { maxOutputChars: request.maxOutputChars }),
      });
      const { jupyter: _reply, ...exec } = result;
      return { kind: "exec", ...exec };
    }
    case "probe_workspace":
      return probeWorkspace(request.path, request.expect);
    case "interrupt": {
      const outcome = kernel.interrupt(request.cell, request.restartAfterMs);
      return { kind: "interrupt", delivered: outcome.kind !== "NotRunning" };
    }
    case "jupyter": {
      const result = await kernel.exec("", {
        onEvent,
        jupyter: {
          msgType: request.msgType,
          content: request.content,
          ...(request.buffers !== undefined && { buffers: request.buffers }),
        },
        ...(request.cell !== undefined && { cell: request.cell }),
        ...(request.maxOutputChars !== undefined && { maxOutputChars: request.maxOutputChars }),
      });
      return jupyterResponse(request.msgType, result);
    }
    case "input_reply":
      return { kind: "input_reply", delivered: kernel.input(request.value) };
    case "restart": {
      const status = await kernel.restart("a restart was asked for");
      return { kind: "restart", restarted: status.state === "running", message: status.message };
    }
    default: {
      const never: never = request;
      throw new Error(`unhandled request ${JSON.stringify(never)}`);
    }
  }
}

/**
 * Reads the marker the daemon wrote into the session's workspace. Finding it with the
 * expected content proves this node sees the user's files where the daemon put them (the
 * workspace is shared storage, not a copy).
 */
async function probeWorkspace(path: string, expect: string): Promise<ProbeWorkspaceResponse> {
  if (!isAbsolute(path)) return { kind: "probe_workspace", found: false, content: null };
  try {
    const content = await Bun.file(path).slice(0, PROBE_READ_BYTES).text();
    return { kind: "probe_workspace", found: content === expect, content };
  } catch {
    return { kind: "probe_workspace", found: false, content: null };
  }
}

/**
 * A Jupyter request's answer. A kernel that could not run it (it died, was restarted, could
 * not start) answers the request type's error reply, so the client is never left waiting.
 */
function jupyterResponse(msgType: string, result: KernelResult): WorkerResponse {
  if (result.jupyter !== null) {
    return { kind: "jupyter", ...result.jupyter, kernelRestarted: result.kernelRestarted };
  }
  // A comm message has no reply in the protocol: "" tells the daemon to send none.
  const replyType = msgType.endsWith("_request")
    ? `${msgType.slice(0, -"_request".length)}_reply`
    : msgType.startsWith("comm_")
      ? ""
      : "error_reply";
  const error = result.error ?? { ename: "KernelError", evalue: "no reply", traceback: "" };
  return {
    kind: "jupyter",
    msgType: replyType,
    content: {
      status: "error",
      ename: error.ename,
      evalue: error.evalue,
      traceback: error.traceback === "" ? [] : [error.traceback],
    },
    kernelRestarted: result.kernelRestarted,
  };
}
