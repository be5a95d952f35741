/**
 * The session routes under /v1/workloads/{id}: exec (an answer, or the cell's events as a
 * stream), re-attaching to a cell's events, interrupt and kernel restart. Registered on the
 * workload routes' app (routes.ts), which they share the workload lookup with.
 */
import { randomUUID } from "node:crypto";
import type { Context, Hono } from "hono";
import type * as v from "valibot";
import type { Workload } from "../../../core/models.ts";
import { finalEvent, logOutput } from "../../../core/session/cell-events.ts";
import { type CellLogEvent, createCellLog } from "../../../core/session/cell-log.ts";
import type { ExecOutcome, SessionService } from "../../../core/session/session-port.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { conflict, notFound } from "../problem.ts";
import { parseWith, readBody } from "../validation.ts";
import { createEventStream } from "./event-stream.ts";
import type {
  ExecResponseBody,
  InterruptResponseSchema,
  RestartResponseSchema,
} from "./exec-schemas.ts";
import { mustBeLiveSession as liveSession, sessionFailure } from "./live-session.ts";
import { CellEventsQuery, ExecBody, ExecQuery } from "./schemas.ts";

/**
 * Output waiting for a slow streaming client, beyond which output events are dropped (with a
 * marker) rather than the kernel paused: four times the largest output the kernel sends.
 */
const EXEC_STREAM_BUFFER_BYTES = 4 * 1024 * 1024;

/** `Accept: text/event-stream` or `?stream=1` asks for server-sent events. */
function wantsStream(c: Context<ApiEnv>, stream: string | undefined): boolean {
  if (stream === "1" || stream === "true") return true;
  return (c.req.header("Accept") ?? "").toLowerCase().includes("text/event-stream");
}

export function registerSessionRoutes(
  app: Hono<ApiEnv>,
  deps: ApiDeps,
  mustGet: (c: Context<ApiEnv>) => Workload,
): void {
  /** What each cell said, for clients that come back (bounded: see cell-log.ts). */
  const cells = createCellLog(deps.clock);

  /** What a client may set for one cell: its time limit, and a lower output cap. */
  type CellLimits = { readonly timeoutSeconds?: number; readonly maxOutputChars?: number };

  /** The checks exec and interrupt share (live-session.ts, also MCP's). */
  const mustBeLiveSession = (c: Context<ApiEnv>) => liveSession(deps, mustGet(c));

  app.post("/v1/workloads/:id/exec", async function exec(c) {
    // The query first, as on every route: `?stream=yes` is refused, not read as "no".
    const query = parseWith(ExecQuery, c.req.query());
    const { workload, sessions } = mustBeLiveSession(c);
    const body = await readBody(c, ExecBody);
    const limit = {
      ...(body.timeoutSeconds === undefined ? {} : { timeoutSeconds: body.timeoutSeconds }),
      ...(body.maxOutputChars === undefined ? {} : { maxOutputChars: body.maxOutputChars }),
    };
    if (wantsStream(c, query.stream)) return streamExec(workload, sessions, body.code, limit);
    // A client that disconnects changes nothing: the cell runs on (see docs/sessions.md).
    const { cell, running } = runLogged(workload, sessions, body.code, limit);
    const outcome = await running;
    if (outcome.kind !== "Ok") sessionFailure(workload, outcome);
    const answer: ExecResponseBody = {
      status: outcome.status,
      output: outcome.output,
      error: outcome.error,
      outputs: [...outcome.outputs],
      kernelRestarted: outcome.kernelRestarted,
      cell,
    };
    return c.json(answer);
  });

  /**
   * The answer is held back until the cell is under way (or failed before it): a session
   * that is not READY still answers 409 problem+json, not a stream with an error inside.
   * Then the stream is the cell's log, followed from its first event: the same events a
   * client re-attaching later reads (GET .../cells/{cell}/events).
   */
  async function streamExec(
    workload: Workload,
    sessions: SessionService,
    code: string,
    limit: CellLimits,
  ): Promise<Response> {
    let started!: () => void;
    const startedPromise = new Promise<"started">((resolve) => {
      started = () => resolve("started");
    });
    const { cell, running } = runLogged(workload, sessions, code, limit, started);
    const first = await Promise.race([startedPromise, running]);
    if (first !== "started" && first.kind !== "Ok") sessionFailure(workload, first);
    running.catch((error) =>
      deps.log.error("streaming exec failed", { workloadId: workload.id, error: String(error) }),
    );
    return cellEventStream(workload, cell, 0);
  }

  /**
   * Runs a cell with its events in the cell log, under a fresh cell id, so a client can
   * read them again: the streaming exec reads them from there too.
   */
  function runLogged(
    workload: Workload,
    sessions: SessionService,
    code: string,
    limit: CellLimits,
    onStart?: () => void,
  ): { readonly cell: string; readonly running: Promise<ExecOutcome> } {
    const cell = randomUUID();
    cells.open(workload.id, cell);
    // An attempt to run code is a present user, whether or not the kernel is ready yet, and
    // stays one while the cell runs, even if its client went away (core/session/presence.ts).
    const present = deps.presence.whileRunning(workload.id);
    const running = sessions.exec(workload.id, code, {
      ...limit,
      ...(onStart !== undefined && { onStart }),
      onOutput: (output) => logOutput(cells, cell, output),
      onKernel: (message) => cells.append(cell, "kernel", { state: "restarting", message }),
    });
    // Exactly one final event, whatever happened: a reader must always see an end.
    const end = (outcome: ExecOutcome | null) => {
      present();
      const [event, data] = finalEvent(outcome);
      cells.append(cell, event, data, true);
    };
    void running.then(end, () => end(null));
    return { cell, running };
  }

  /** A cell's events after `afterId` as server-sent events, each with its `id:`. */
  function cellEventStream(workload: Workload, cell: string, afterId: number): Response {
    const stream = createEventStream({
      maxBufferedBytes: EXEC_STREAM_BUFFER_BYTES,
      keepaliveMs: 15_000,
      timers: deps.timers,
    });
    const send = (e: CellLogEvent, final: boolean) => {
      stream.push(e.event, e.data, { droppable: !final && e.event !== "kernel", id: e.id });
      if (final) stream.close();
    };
    const attached = cells.attach(workload.id, cell, afterId, send);
    if (attached.kind !== "Attached") {
      throw notFound(
        `no cell ${JSON.stringify(cell)} in session ${workload.id} (unknown, or its output was not kept)`,
      );
    }
    // The client going away detaches it; the cell runs on.
    stream.cancelled.addEventListener("abort", attached.detach, { once: true });
    attached.replay.forEach((e, index) => {
      send(e, attached.finished && index === attached.replay.length - 1);
    });
    if (attached.finished && attached.replay.length === 0) stream.close();
    return new Response(stream.body, {
      headers: {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-store",
        "X-Accel-Buffering": "no",
      },
    });
  }

  app.get("/v1/workloads/:id/cells/:cell/events", function cellEvents(c) {
    const query = parseWith(CellEventsQuery, c.req.query());
    const workload = mustGet(c);
    if (!deps.sessions) {
      throw conflict(
        "sessions-disabled",
        "Sessions disabled",
        "sessions are not enabled on this daemon",
      );
    }
    const cell = c.req.param("cell");
    // Last-Event-ID is what an EventSource sends on its own when it reconnects.
    const header = c.req.header("Last-Event-ID");
    const after =
      query.after ?? (header !== undefined && /^[0-9]{1,9}$/.test(header) ? Number(header) : 0);
    return cellEventStream(workload, cell, after);
  });

  app.post("/v1/workloads/:id/interrupt", async function interrupt(c) {
    const { workload, sessions } = mustBeLiveSession(c);
    const outcome = await sessions.interrupt(workload.id);
    if (outcome.kind !== "Ok") sessionFailure(workload, outcome);
    deps.log.info("interrupt requested", {
      workloadId: workload.id,
      interrupted: outcome.interrupted,
    });
    const answer: v.InferOutput<typeof InterruptResponseSchema> = {
      interrupted: outcome.interrupted,
    };
    return c.json(answer);
  });

  app.post("/v1/workloads/:id/restart", async function restart(c) {
    const { workload, sessions } = mustBeLiveSession(c);
    const outcome = await sessions.restart(workload.id);
    if (outcome.kind !== "Ok") sessionFailure(workload, outcome);
    deps.log.info("kernel restart requested", {
      workloadId: workload.id,
      running: outcome.running,
    });
    const answer: v.InferOutput<typeof RestartResponseSchema> = {
      running: outcome.running,
      message: outcome.message,
    };
    return c.json(answer);
  });
}
