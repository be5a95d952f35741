/**
 * A kernel hub's state and what it says to its sockets: status, a reply to the socket that
 * asked, an error reply, and a kernel event relayed as Jupyter messages (iopub to every
 * socket, stdin only to the asker). The hub (hub.ts) decides when; this file says how.
 */
import type { CellEvent } from "../../../wire/worker-protocol.ts";
import type { Client, ClientSessions } from "./client-sessions.ts";
import {
  type Channel,
  type ClientMessage,
  type Header,
  jupyterBundle,
  kernelMessage,
  replyType,
} from "./messages.ts";

export type ExecutionState = "starting" | "idle" | "busy" | "restarting" | "dead";

export interface Hub {
  readonly id: string;
  readonly clients: ClientSessions;
  kernelSession: string;
  executionState: ExecutionState;
  lastActivityMs: number | null;
  kernelInfo: Readonly<Record<string, unknown>> | null;
  chain: Promise<void>;
  /** Shell requests received so far (their order of arrival). */
  received: number;
  /** Execute requests received up to this one are aborted: an earlier cell failed. */
  abortThrough: number;
  /** Cancels the watch on the session. */
  watch: (() => void) | null;
  /**
   * Headers of recent execute requests by msg_id: the parents of output between requests
   * (a cell's, never a completion's, which no front end shows).
   */
  readonly parents: Map<string, Header>;
  lastParent: Header;
}

/** Headers kept to parent output between requests (the newest ones). */
export const RECENT_PARENTS = 64;

export function status(h: Hub, state: ExecutionState, parent: Header): void {
  h.executionState = state;
  h.clients.broadcast(
    kernelMessage("iopub", "status", { execution_state: state }, parent, h.kernelSession),
  );
}

export function reply(
  h: Hub,
  socket: Client,
  channel: Channel,
  request: ClientMessage,
  msgType: string,
  content: Readonly<Record<string, unknown>>,
): void {
  socket.send(kernelMessage(channel, msgType, content, request.header, h.kernelSession), true);
}

export function errorReply(
  h: Hub,
  socket: Client,
  request: ClientMessage,
  ename: string,
  evalue: string,
) {
  const content = { status: "error", ename, evalue, traceback: [`${ename}: ${evalue}`] };
  reply(h, socket, request.channel, request, replyType(request.msgType), content);
}

/**
 * One output, to the sockets that should see it: a request's (`socket` asked it), or one
 * made while no request ran (`socket` null: there is nobody to ask for input).
 */
export function relay(
  h: Hub,
  socket: Client | null,
  parent: Header,
  event: CellEvent,
  nowMs: number,
): void {
  h.lastActivityMs = nowMs;
  switch (event.type) {
    case "stream":
      h.clients.broadcast(
        kernelMessage(
          "iopub",
          "stream",
          { name: event.name, text: event.text },
          parent,
          h.kernelSession,
        ),
      );
      return;
    case "display_data": {
      const content = { data: jupyterBundle(event.data), metadata: {}, transient: {} };
      h.clients.broadcast(kernelMessage("iopub", "display_data", content, parent, h.kernelSession));
      return;
    }
    case "jupyter": {
      const text = kernelMessage(
        event.channel,
        event.msgType,
        event.content,
        parent,
        h.kernelSession,
        event.metadata ?? {},
        event.buffers ?? [],
      );
      if (event.channel === "stdin") {
        socket?.send(text, true);
        return;
      }
      if (event.msgType === "status") {
        const state = event.content["execution_state"];
        if (state === "busy" || state === "idle") h.executionState = state;
      }
      h.clients.broadcast(text);
      return;
    }
    case "kernel":
      // The interpreter is being replaced (an interrupt did not stop the cell): front ends
      // show "restarting"; the request's error reply follows when the cell is failed.
      h.clients.broadcast(
        kernelMessage(
          "iopub",
          "status",
          { execution_state: "restarting" },
          parent,
          h.kernelSession,
        ),
      );
      return;
    default: {
      const never: never = event;
      throw new Error(`unhandled event ${JSON.stringify(never)}`);
    }
  }
}
