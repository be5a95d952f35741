/**
 * One hub per kernel: its websockets, its execution state, and the order of its shell
 * requests. Shell requests run one after another (as a Jupyter kernel's shell does), each
 * waiting until the session is READY: a kernel started on a busy cluster takes messages at
 * once and answers them when its allocation runs. iopub goes to every socket of the kernel,
 * a shell reply and an input prompt only to the socket that asked. Control (interrupt,
 * shutdown) and stdin (input replies) never wait behind a running cell.
 *
 * Output while no request runs (a thread a cell started prints on, a widget changes) reaches
 * every socket as it happens, parented to the cell that ran last (ipykernel's parent), so
 * a front end shows it under the cell that started the thread. Comm messages from a client
 * (comm_open, comm_msg, comm_close) run in shell order, as ipykernel's do, and get no reply.
 *
 * While a kernel has sockets, its session is watched: when it ends (cancelled, idle
 * reclaimed, lifetime, lost), every socket hears `status: dead` and is closed with the reason.
 *
 * Over 400 lines because one kernel's websockets, execution state and shell order share one factory; what it says to its sockets is hub-messages.ts.
 */

import { randomUUID } from "node:crypto";
import type { JupyterService, RestartOutcome } from "../../../core/session/jupyter-service.ts";
import type { Presence } from "../../../core/session/presence.ts";
import type { InterruptOutcome } from "../../../core/session/session-port.ts";
import type { Timers } from "../../../lib/clock.ts";
import type { Log } from "../../../lib/log.ts";
import {
  type Client,
  createClientSessions,
  DEFAULT_REPLAY_LIMITS,
  type KernelSocket,
  type Replayed,
  type ReplayLimits,
} from "./client-sessions.ts";
import {
  type ExecutionState,
  errorReply,
  type Hub,
  RECENT_PARENTS,
  relay,
  reply,
  status,
} from "./hub-messages.ts";
import { type ClientMessage, type Header, kernelMessage, parseClientMessage } from "./messages.ts";

export type { KernelSocket } from "./client-sessions.ts";
export type { ExecutionState } from "./hub-messages.ts";

export interface KernelActivity {
  readonly executionState: ExecutionState;
  readonly connections: number;
  /** Epoch ms of the last message either way; null when none since this daemon started. */
  readonly lastActivityMs: number | null;
}

export interface KernelHubsDeps {
  readonly jupyter: JupyterService;
  readonly interrupt: (workloadId: string) => Promise<InterruptOutcome>;
  /** Ends the session (a `shutdown_request` without restart). */
  readonly shutdown: (workloadId: string) => void;
  /** When a user is present (a request runs): the session's idle clock starts again. */
  readonly presence: Presence;
  readonly now: () => number;
  readonly log: Log;
  /**
   * A waiting request and a watched session look again when the kernel's standing changed
   * (`jupyter.standingChanged`, told by readiness), and at the latest after this long: a
   * guard against a change nobody told, never the way READY is learnt (default 5 s).
   */
  readonly recheckMs?: number;
  /** What a client's session keeps while its websocket is gone (client-sessions.ts). */
  readonly replay?: ReplayLimits;
  readonly timers: Timers;
}

export interface KernelHubs {
  /**
   * A new websocket of `workloadId`'s kernel, of client session `sessionKey` (null: none
   * named, nothing kept for it): feed it the socket's frames and its close. With
   * `sessionKeyOf`, a websocket that named none takes the session its first message's
   * header names (the key `sessionKeyOf` makes of it; null: none).
   */
  connect(
    workloadId: string,
    socket: KernelSocket,
    sessionKey?: string | null,
    sessionKeyOf?: (headerSession: string) => string | null,
  ): { onMessage(text: string): void; onClose(): void };
  activity(workloadId: string): KernelActivity;
  restart(workloadId: string): Promise<RestartOutcome>;
  /** Closes every socket (the daemon is stopping: clients reconnect to the next one). */
  closeAll(reason: string): void;
}

/** A comm message has no reply in the protocol (the kernel answers it with iopub, if at all). */
function isComm(msgType: string): boolean {
  return msgType === "comm_open" || msgType === "comm_msg" || msgType === "comm_close";
}

/**
 * What one socket may have waiting in its kernel's shell queue: each request sits in the
 * daemon's memory until the cell ahead of it ends, so a client flooding comm_msgs or 16 MB
 * execute_requests behind a long cell would otherwise make the daemon hold all of it. ZMQ's
 * default high-water mark, and the outbound side's backpressure limit (socket.ts).
 */
const MAX_QUEUED_REQUESTS = 1000;
const MAX_QUEUED_BYTES = 64 * 1024 * 1024;

/** One socket's requests still waiting in (or running from) the shell queue. */
interface Queued {
  count: number;
  bytes: number;
}

/**
 * Serial, and never broken by one failure: the next request still runs. Numbered as they
 * arrive: a failed cell aborts the executes queued behind it, not later ones. False (nothing
 * queued) when the socket is over its share; its earlier requests stay queued.
 */
function queueShell(
  h: Hub,
  queued: Queued,
  bytes: number,
  run: (arrival: number) => Promise<void>,
  log: Log,
): boolean {
  if (queued.count >= MAX_QUEUED_REQUESTS || queued.bytes + bytes > MAX_QUEUED_BYTES) {
    log.warn("jupyter: a client queued too many requests; closing its socket", {
      kernel: h.id,
      queued: queued.count,
      queuedBytes: queued.bytes,
    });
    return false;
  }
  queued.count += 1;
  queued.bytes += bytes;
  const arrival = ++h.received;
  h.chain = h.chain
    .then(() => run(arrival))
    .catch((error: unknown) => {
      log.error("jupyter: shell request failed", { kernel: h.id, error: String(error) });
    })
    .then(() => {
      queued.count -= 1;
      queued.bytes -= bytes;
    });
  return true;
}

function rememberParent(h: Hub, header: Header): void {
  h.lastParent = header;
  h.parents.set(String(header["msg_id"]), header);
  for (const id of h.parents.keys()) {
    if (h.parents.size <= RECENT_PARENTS) break;
    h.parents.delete(id);
  }
}

/**
 * After the replay: what was dropped from it (said, so a gap in the output is not taken for
 * the cell's), then the kernel's state, which a client attaching mid-cell has not seen.
 */
function greet(h: Hub, socket: KernelSocket, replayed: Replayed, maxBytes: number): void {
  if (replayed.dropped > 0) {
    const text = `[openai4s: ${replayed.dropped} output messages (${replayed.droppedBytes} bytes) sent while this client was disconnected were dropped: over the ${maxBytes}-byte replay bound]\n`;
    socket.send(
      kernelMessage("iopub", "stream", { name: "stderr", text }, h.lastParent, h.kernelSession),
    );
  }
  // Only a busy kernel: JupyterLab takes any other status on a fresh websocket during its
  // restart() as the kernel's own news and cancels its kernel_info_request.
  if (h.executionState !== "busy") return;
  socket.send(kernelMessage("iopub", "status", { execution_state: "busy" }, {}, h.kernelSession));
}

/** The client session a message's header names (jupyter_client's Session id), if any. */
function headerSession(text: string): string | null {
  const m = parseClientMessage(text);
  const session = typeof m === "string" ? undefined : m.header["session"];
  return typeof session === "string" && session !== "" ? session : null;
}

/** One share of the shell queue per client session: reconnecting does not buy another. */
function shareOf(queues: WeakMap<Client, Queued>, client: Client): Queued {
  let queued = queues.get(client);
  if (queued === undefined) {
    queued = { count: 0, bytes: 0 };
    queues.set(client, queued);
  }
  return queued;
}

export function createKernelHubs(deps: KernelHubsDeps): KernelHubs {
  const hubs = new Map<string, Hub>();
  const recheckMs = deps.recheckMs ?? 5000;
  const replay = deps.replay ?? DEFAULT_REPLAY_LIMITS;
  const { timers } = deps;

  function hubOf(id: string): Hub {
    let h = hubs.get(id);
    if (!h) {
      h = {
        id,
        clients: createClientSessions(replay, timers, () => {
          const it = hubs.get(id);
          if (it) stopWatching(it);
        }),
        kernelSession: randomUUID(),
        executionState: "idle",
        lastActivityMs: null,
        kernelInfo: null,
        chain: Promise.resolve(),
        received: 0,
        abortThrough: 0,
        watch: null,
        parents: new Map(),
        lastParent: {},
      };
      hubs.set(id, h);
    }
    return h;
  }

  /** Until the kernel's standing may have changed, the guard's period, or `signal` aborts. */
  function nextLook(id: string, signal?: AbortSignal): Promise<void> {
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    const cancel = timers.after(recheckMs, onAbort);
    return deps.jupyter.standingChanged(id, stop.signal).finally(() => {
      cancel();
      signal?.removeEventListener("abort", onAbort);
      stop.abort();
    });
  }

  /** Waits until READY; false (and the client told) when the session will never be. */
  async function untilReady(h: Hub, socket: Client, request: ClientMessage): Promise<boolean> {
    for (;;) {
      const standing = deps.jupyter.standing(h.id);
      if (standing.kind === "Ready") return true;
      if (standing.kind === "NotFound" || standing.kind === "Dead") {
        const why = standing.kind === "Dead" ? standing.message : "no such kernel";
        errorReply(h, socket, request, "KernelDead", why);
        return false;
      }
      if (h.executionState !== "restarting") h.executionState = "starting";
      await nextLook(h.id);
    }
  }

  async function runShell(
    h: Hub,
    socket: Client,
    request: ClientMessage,
    arrival: number,
  ): Promise<void> {
    if (request.msgType === "execute_request" && arrival <= h.abortThrough) {
      // Queued behind a cell that failed with stop_on_error ("Run All" stops at the error),
      // as ipykernel answers such requests.
      status(h, "busy", request.header);
      reply(h, socket, "shell", request, "execute_reply", { status: "aborted" });
      status(h, "idle", request.header);
      return;
    }
    if (!(await untilReady(h, socket, request))) return;
    if (request.msgType === "execute_request") rememberParent(h, request.header);
    const present = deps.presence.whileRunning(h.id);
    try {
      let idle = false;
      const outcome = await deps.jupyter.request(h.id, request.msgType, request.content, {
        onEvent: (event) => {
          if (event.type === "jupyter" && event.msgType === "status") {
            idle = event.content["execution_state"] === "idle";
          }
          relay(h, socket, request.header, event, deps.now());
        },
        cell: String(request.header["msg_id"]),
        buffers: request.buffers,
        ...(request.maxOutputChars === undefined ? {} : { maxOutputChars: request.maxOutputChars }),
      });
      if (outcome.kind !== "Reply") {
        const message = outcome.kind === "NotReady" ? outcome.message : "no such kernel";
        // A comm message has no reply to carry the refusal (too large, kernel gone): logged.
        if (isComm(request.msgType))
          deps.log.warn("jupyter: comm message not delivered", { kernel: h.id, message });
        else errorReply(h, socket, request, "KernelNotReady", message);
        status(h, "idle", request.header);
        return;
      }
      if (outcome.msgType === "kernel_info_reply") h.kernelInfo = outcome.content;
      if (
        outcome.msgType === "execute_reply" &&
        outcome.content["status"] === "error" &&
        request.content["stop_on_error"] !== false
      ) {
        h.abortThrough = h.received;
      }
      // "": a comm message, which the protocol answers with no reply.
      if (outcome.msgType !== "") {
        reply(h, socket, "shell", request, outcome.msgType, outcome.content);
      }
      // The interpreter died under the request (os._exit, a segfault, the OOM killer): it
      // never said idle (maybe not even busy: its last lines die with it), and a client
      // waits for idle as much as for the reply. The next request starts a fresh one.
      if (!idle) status(h, "idle", request.header);
    } finally {
      present();
    }
  }

  // Output between requests: parented to the cell that ran last, as ipykernel does.
  const queues = new WeakMap<Client, Queued>();

  const unsubscribe = deps.jupyter.onOutput((workloadId, cell, event) => {
    const h = hubs.get(workloadId);
    if (h === undefined || h.clients.size() === 0) return;
    const parent = (cell !== null ? h.parents.get(cell) : undefined) ?? h.lastParent;
    relay(h, null, parent, event, deps.now());
  });

  /** kernel_info from what the kernel said before: a reconnecting client is not held behind a cell. */
  function answerKernelInfo(h: Hub, socket: Client, request: ClientMessage): boolean {
    if (h.kernelInfo === null) return false;
    const state = h.executionState;
    socket.send(
      kernelMessage(
        "iopub",
        "status",
        { execution_state: "busy" },
        request.header,
        h.kernelSession,
      ),
    );
    reply(h, socket, request.channel, request, "kernel_info_reply", h.kernelInfo);
    socket.send(
      kernelMessage(
        "iopub",
        "status",
        { execution_state: state === "busy" ? "busy" : "idle" },
        request.header,
        h.kernelSession,
      ),
    );
    return true;
  }

  async function runControl(h: Hub, socket: Client, request: ClientMessage): Promise<void> {
    switch (request.msgType) {
      case "interrupt_request": {
        const outcome = await deps.interrupt(h.id);
        if (outcome.kind === "Ok")
          reply(h, socket, "control", request, "interrupt_reply", { status: "ok" });
        else
          errorReply(
            h,
            socket,
            request,
            "KernelNotReady",
            outcome.kind === "NotReady" ? outcome.message : "no such kernel",
          );
        return;
      }
      case "shutdown_request": {
        const restart = request.content["restart"] === true;
        if (restart) await restartHub(h);
        else deps.shutdown(h.id);
        reply(h, socket, "control", request, "shutdown_reply", { status: "ok", restart });
        return;
      }
      default:
        errorReply(
          h,
          socket,
          request,
          "UnknownMessageType",
          `no control message ${JSON.stringify(request.msgType)}`,
        );
    }
  }

  function onMessage(h: Hub, socket: Client, text: string, queued: Queued): void {
    h.lastActivityMs = deps.now();
    const request = parseClientMessage(text);
    if (typeof request === "string") {
      deps.log.warn("jupyter: a message that is not one", { kernel: h.id, problem: request });
      return;
    }
    // In the kernel's shell order (kernel_info from what it said before, when it did); the
    // socket closed (1008) when over its share of the queue.
    const toShell = () => {
      if (request.msgType === "kernel_info_request" && answerKernelInfo(h, socket, request)) return;
      const run = (arrival: number) => runShell(h, socket, request, arrival);
      if (!queueShell(h, queued, text.length, run, deps.log))
        socket.close(1008, "too many requests queued behind the running cell");
    };
    switch (request.channel) {
      case "shell":
        toShell();
        return;
      case "control":
        if (request.msgType === "kernel_info_request") toShell();
        else
          void runControl(h, socket, request).catch((error: unknown) => {
            deps.log.error("jupyter: control request failed", {
              kernel: h.id,
              error: String(error),
            });
          });
        return;
      case "stdin":
        if (request.msgType === "input_reply") {
          void deps.jupyter.inputReply(h.id, String(request.content["value"] ?? ""));
        }
        return;
      default: {
        const never: never = request.channel;
        throw new Error(`unhandled channel ${JSON.stringify(never)}`);
      }
    }
  }

  /** The session ended: every socket is told and closed, and the hub forgotten. */
  function watch(h: Hub): void {
    if (h.watch !== null) return;
    const watching = new AbortController();
    h.watch = () => watching.abort();
    const look = (): boolean => {
      const standing = deps.jupyter.standing(h.id);
      if (standing.kind === "Ready") {
        if (h.executionState === "starting") h.executionState = "idle";
        return true;
      }
      if (standing.kind === "Starting") return true;
      const reason = standing.kind === "Dead" ? standing.message : "no such kernel";
      status(h, "dead", {});
      h.clients.closeAll(1000, reason.slice(0, 120));
      stopWatching(h);
      hubs.delete(h.id);
      return false;
    };
    void (async () => {
      // As the timer did: the first look after a change or the guard's period, not at once.
      while (!watching.signal.aborted) {
        await nextLook(h.id, watching.signal);
        if (watching.signal.aborted || !look()) return;
      }
    })().catch((error: unknown) => {
      deps.log.error("jupyter: watching a session failed", { kernel: h.id, error: String(error) });
    });
  }

  function stopWatching(h: Hub): void {
    h.watch?.();
    h.watch = null;
  }

  async function restartHub(h: Hub): Promise<RestartOutcome> {
    status(h, "restarting", {});
    const outcome = await deps.jupyter.restart(h.id);
    h.kernelSession = randomUUID();
    status(h, outcome.kind === "Restarted" ? "starting" : "dead", {});
    if (outcome.kind === "Restarted") status(h, "idle", {});
    return outcome;
  }

  return {
    connect(workloadId, socket, sessionKey = null, sessionKeyOf) {
      const h = hubOf(workloadId);
      if (deps.jupyter.standing(workloadId).kind !== "Ready") h.executionState = "starting";
      let { client, replayed } = h.clients.attach(sessionKey, socket);
      greet(h, socket, replayed, replay.maxBytes);
      watch(h);
      let share = shareOf(queues, client);
      // Classic Notebook 6 and jupyter_server 1.x in gateway mode drop the browser's
      // session_id from the websocket they open here, but forward its messages, whose
      // header names that session: without learning it, a reconnect mid-cell lost the
      // cell's output and execute_reply (the notebook showed [*] forever).
      let learning = sessionKey === null && sessionKeyOf !== undefined;
      return {
        onMessage: (text) => {
          if (learning) {
            learning = false;
            const session = headerSession(text);
            const key = session === null ? null : (sessionKeyOf?.(session) ?? null);
            const adopted = key === null ? null : h.clients.adopt(client, socket, key);
            if (adopted !== null) {
              ({ client, replayed } = adopted);
              greet(h, socket, replayed, replay.maxBytes);
              share = shareOf(queues, client);
            }
          }
          onMessage(h, client, text, share);
        },
        onClose: () => h.clients.detach(client, socket),
      };
    },
    activity(workloadId) {
      const h = hubs.get(workloadId);
      const standing = deps.jupyter.standing(workloadId).kind;
      const executionState: ExecutionState =
        standing === "Ready"
          ? (h?.executionState ?? "idle")
          : standing === "Starting"
            ? h?.executionState === "restarting"
              ? "restarting"
              : "starting"
            : "dead";
      return {
        executionState,
        connections: h?.clients.attachedCount() ?? 0,
        lastActivityMs: h?.lastActivityMs ?? null,
      };
    },
    restart: (workloadId) => restartHub(hubOf(workloadId)),
    closeAll(reason) {
      unsubscribe();
      for (const h of hubs.values()) {
        // 1012 (service restart): JupyterLab takes 1000/1001 as final and never reconnects.
        h.clients.closeAll(1012, reason);
        stopWatching(h);
      }
      hubs.clear();
    },
  };
}
