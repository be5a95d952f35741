/**
 * The workload routes. Handlers are named functions so a stack trace or a route listing
 * says which one ran.
 */
import { randomUUID } from "node:crypto";
import { type Context, Hono } from "hono";
import type * as v from "valibot";
import {
  getPrincipal,
  getWorkload,
  listAllocations,
  listConditions,
  listEvents,
  requestStop,
  touchActivity,
} from "../../../adapters/store-sqlite/index.ts";
import type { Submitter } from "../../../core/admission.ts";
import type { Workload } from "../../../core/models.ts";
import { isTerminal } from "../../../core/models.ts";
import type { Caller } from "../../../core/principals.ts";
import { finalEvent, logOutput } from "../../../core/session/cell-events.ts";
import { type CellLogEvent, createCellLog } from "../../../core/session/cell-log.ts";
import type {
  ExecOutcome,
  InterruptOutcome,
  RestartOutcome,
  SessionService,
} from "../../../core/session/session-service.ts";
import { placeStep, type StepPlacement } from "../../../core/steps.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError, conflict, notFound, validationFailed } from "../problem.ts";
import { parseWith, readBody, readJson } from "../validation.ts";
import { eventView, type PhaseConfirmedAt, type WorkloadView, workloadView } from "../views.ts";
import { decodeCursor, encodeCursor } from "./cursor.ts";
import { createEventStream } from "./event-stream.ts";
import type {
  ExecResponseBody,
  InterruptResponseSchema,
  RestartResponseSchema,
} from "./exec-schemas.ts";
import {
  CellEventsQuery,
  ExecBody,
  ExecQuery,
  LIMITS,
  ListQuery,
  SubmitBody,
  TaskBody,
} from "./schemas.ts";
import { normalize, parseIdempotencyKey, submitWorkload } from "./submit.ts";
import { createWorkloadViewCache } from "./view-cache.ts";

/**
 * Below the spool's low-water mark nothing new is admitted (issue 18: a full spool made the
 * next job fail with an empty log as if its code were wrong). After validation, so a bad
 * body still hears what is wrong with it; before anything is written.
 */
function refuseWhenSpoolLow(deps: ApiDeps): void {
  const space = deps.spool?.report();
  if (space === undefined || !space.low) return;
  throw new ApiError({
    status: 503,
    slug: "spool-full",
    title: "Spool full",
    detail: space.message ?? `the spool ${space.path} is below its low-water mark`,
    extensions: { freeBytes: space.freeBytes, lowWaterBytes: space.lowWaterBytes },
  });
}

export function createWorkloadRoutes(deps: ApiDeps) {
  /** What each cell said, for clients that come back (bounded: see cell-log.ts). */
  const cells = createCellLog(deps.clock);
  /** The admin submits unowned and unlimited; a principal under its stored limits. */
  function submitterFor(caller: Caller): Submitter {
    if (caller.kind === "Admin") return { owner: null, limits: null };
    const principal = getPrincipal(deps.store, caller.name);
    // Removed while its token was in flight: held to nothing rather than to no limit.
    return {
      owner: caller.name,
      limits: principal ?? { maxSessions: 0, maxBatch: 0, maxCpus: 0, maxGpus: 0 },
    };
  }

  const app = new Hono<ApiEnv>();

  const confirmed: PhaseConfirmedAt = (allocationId) =>
    deps.reconciler.phaseConfirmedAt?.(allocationId) ?? null;

  function view(workload: Workload): WorkloadView {
    return workloadView(
      workload,
      listConditions(deps.store, workload.id),
      listAllocations(deps.store, workload.id),
      deps.clock.now(),
      confirmed,
    );
  }

  // Per app, not per module: each daemon (and each test's app) has its own store.
  const views = createWorkloadViewCache(deps.store, { confirmed });
  /** Already-serialized JSON, sent as `c.json` would send it. */
  const jsonText = (c: Context<ApiEnv>, text: string) =>
    c.body(text, 200, { "Content-Type": "application/json" });

  function mustGet(c: Context<ApiEnv>): Workload {
    const id = c.req.param("id") ?? "";
    const workload = getWorkload(deps.store, id);
    if (!workload) throw notFound(`no workload ${JSON.stringify(id)}`);
    return workload;
  }

  app.post("/v1/workloads", async function submit(c) {
    const key = parseIdempotencyKey(c.req.header("idempotency-key"));
    const submission = normalize(parseWith(SubmitBody, await readJson(c)));
    refuseWhenSpoolLow(deps);
    const outcome = await submitWorkload(deps, submission, key, submitterFor(c.get("caller")));
    switch (outcome.kind) {
      case "Admitted": {
        // Just created: no conditions yet, and its only allocation (if any) is the attempt
        // minted with it. Built from that rather than read back, and before the attempt goes
        // out: on the way from POST to the backend, each read here was a millisecond.
        const body = workloadView(
          outcome.workload,
          [],
          outcome.attempt === null ? [] : [outcome.attempt],
          deps.clock.now(),
          confirmed,
        );
        deps.reconciler.admitted(outcome.workload, outcome.attempt);
        deps.log.info("workload accepted", {
          workloadId: outcome.workload.id,
          kind: outcome.workload.kind,
          profile: outcome.workload.profile,
        });
        c.header("Location", `/v1/workloads/${outcome.workload.id}`);
        return c.json(body, 201);
      }
      case "Replayed":
        return c.json(view(outcome.workload), 200);
      default: {
        const never: never = outcome;
        throw new Error(`unhandled submit outcome ${JSON.stringify(never)}`);
      }
    }
  });

  app.get("/v1/workloads", function list(c) {
    // `?kind=&phase=` (INTERFACE.md's own template, and what forms send) means "not given":
    // an empty parameter is dropped before validation rather than refused as a bad value.
    // `?kind=` is "no filter"; an unknown key stays, to be refused even when empty.
    const given = Object.fromEntries(
      Object.entries(c.req.query()).filter(([k, v]) => v !== "" || !(k in ListQuery.entries)),
    );
    const query = parseWith(ListQuery, given);
    let cursor: { readonly createdAt: number; readonly id: string } | undefined;
    if (query.cursor !== undefined) {
      const decoded = decodeCursor(query.cursor);
      if (!decoded) {
        throw validationFailed([{ path: "cursor", message: "not a cursor this API issued" }]);
      }
      cursor = decoded;
    }
    const caller = c.get("caller");
    // A principal lists its own workloads only; asking for another's gives an empty page.
    const owner = caller.kind === "Principal" ? caller.name : query.owner;
    if (caller.kind === "Principal" && query.owner !== undefined && query.owner !== owner) {
      return jsonText(c, `{"items":[],"nextCursor":null}`);
    }
    // Cached serialized views; the misses come from batched statements (view-cache.ts).
    const page = views.list({
      ...(owner !== undefined ? { owner } : {}),
      limit: query.limit ?? LIMITS.listLimitDefault,
      ...(query.kind !== undefined ? { kind: query.kind } : {}),
      ...(query.phase !== undefined ? { phase: query.phase } : {}),
      ...(query.backendJobId !== undefined ? { backendJobId: query.backendJobId } : {}),
      ...(cursor !== undefined ? { cursor } : {}),
    });
    // The text JSON.stringify({ items, nextCursor }) gives, without re-serializing items.
    const nextCursor = JSON.stringify(page.next ? encodeCursor(page.next) : null);
    return jsonText(c, `{"items":[${page.items.join(",")}],"nextCursor":${nextCursor}}`);
  });

  app.get("/v1/workloads/:id", function show(c) {
    const id = c.req.param("id");
    const json = views.show(id);
    if (json === null) throw notFound(`no workload ${JSON.stringify(id)}`);
    return jsonText(c, json);
  });

  app.get("/v1/workloads/:id/events", function events(c) {
    const workload = mustGet(c);
    // A bare array: INTERFACE.md gives this route no wrapper, unlike the list and profiles.
    return c.json(listEvents(deps.store, workload.id).map(eventView));
  });

  app.post("/v1/workloads/:id/cancel", function cancel(c) {
    const workload = mustGet(c);
    const result = requestStop(deps.store, workload.id, "USER_CANCELLED", "cancelled by the user");
    switch (result.kind) {
      case "NotFound":
        throw notFound(`no workload ${JSON.stringify(workload.id)}`);
      case "Requested":
        deps.log.info("cancel requested", { workloadId: workload.id });
        deps.reconciler.wake();
        break;
      case "AlreadyRequested":
      case "AlreadyTerminal":
        // Idempotent: the first request already did everything a second one could.
        break;
      default: {
        const never: never = result;
        throw new Error(`unhandled stop result ${JSON.stringify(never)}`);
      }
    }
    const after = getWorkload(deps.store, workload.id) ?? workload;
    return c.json(view(after), 202);
  });

  /** The checks exec and interrupt share: a live SESSION on a daemon with sessions. */
  function mustBeLiveSession(c: Context<ApiEnv>): { workload: Workload; sessions: SessionService } {
    const workload = mustGet(c);
    if (!deps.sessions) {
      throw conflict(
        "sessions-disabled",
        "Sessions disabled",
        "sessions are not enabled on this daemon",
      );
    }
    if (workload.kind !== "SESSION") {
      throw conflict(
        "not-a-session",
        "Not a session",
        `workload ${workload.id} is a ${workload.kind}, not a SESSION`,
      );
    }
    if (isTerminal(workload.phase)) {
      throw conflict(
        "workload-ended",
        "Workload ended",
        `workload ${workload.id} is ${workload.phase}`,
      );
    }
    return { workload, sessions: deps.sessions };
  }

  /** A session call's refusals (exec and interrupt answer alike), as problems. */
  function sessionFailure(
    workload: Workload,
    outcome: Exclude<ExecOutcome | InterruptOutcome | RestartOutcome, { readonly kind: "Ok" }>,
  ): never {
    switch (outcome.kind) {
      case "NotReady":
        throw conflict("session-not-ready", "Session not ready", outcome.message);
      case "NotFound":
        throw notFound(`no session for workload ${JSON.stringify(workload.id)}`);
      default: {
        const never: never = outcome;
        throw new Error(`unhandled session outcome ${JSON.stringify(never)}`);
      }
    }
  }

  app.post("/v1/workloads/:id/exec", async function exec(c) {
    // The query first, as on every route: `?stream=yes` is refused, not read as "no".
    const query = parseWith(ExecQuery, c.req.query());
    const { workload, sessions } = mustBeLiveSession(c);
    const body = await readBody(c, ExecBody);
    // An attempt to run code is a present user, whether or not the kernel is ready yet.
    touchActivity(deps.store, workload.id);
    const limit = body.timeoutSeconds === undefined ? {} : { timeoutSeconds: body.timeoutSeconds };
    if (wantsStream(c, query.stream)) return streamExec(workload, sessions, body.code, limit);
    // A client that disconnects changes nothing: the cell runs on (see docs/sessions.md).
    const { cell, running } = runLogged(workload, sessions, body.code, limit);
    const outcome = await running;
    if (outcome.kind !== "Ok") sessionFailure(workload, outcome);
    // Again after the run: a long computation must not leave the lease looking idle.
    touchActivity(deps.store, workload.id);
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
    limit: { readonly timeoutSeconds?: number },
  ): Promise<Response> {
    let started!: () => void;
    const startedPromise = new Promise<"started">((resolve) => {
      started = () => resolve("started");
    });
    const { cell, running } = runLogged(workload, sessions, code, limit, started);
    const first = await Promise.race([startedPromise, running]);
    if (first !== "started" && first.kind !== "Ok") sessionFailure(workload, first);
    void running.then(
      () => touchActivity(deps.store, workload.id),
      (error) =>
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
    limit: { readonly timeoutSeconds?: number },
    onStart?: () => void,
  ): { readonly cell: string; readonly running: Promise<ExecOutcome> } {
    const cell = randomUUID();
    cells.open(workload.id, cell);
    const running = sessions.exec(workload.id, code, {
      ...limit,
      ...(onStart !== undefined && { onStart }),
      onOutput: (output) => logOutput(cells, cell, output),
      onKernel: (message) => cells.append(cell, "kernel", { state: "restarting", message }),
    });
    // Exactly one final event, whatever happened: a reader must always see an end.
    const end = (outcome: ExecOutcome | null) => {
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

  app.post("/v1/workloads/:id/tasks", async function tasks(c) {
    const workload = mustGet(c);
    const body = await readBody(c, TaskBody);
    const placement = placeStep(deps.backend, workload, listAllocations(deps.store, workload.id));
    if (placement.kind === "Refused") throw stepProblem(placement.reason, placement.message);
    const { runner, target } = placement;
    touchActivity(deps.store, workload.id);
    const result = await runner.runTask(target, body.command, {
      timeoutMs: (body.timeoutSeconds ?? LIMITS.taskTimeoutDefaultSeconds) * 1000,
      subject: { profile: workload.profile, owner: workload.owner ?? null },
    });
    touchActivity(deps.store, workload.id);
    switch (result.kind) {
      case "Completed":
        return c.json({ exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr });
      case "Refused":
        throw conflict("task-refused", "Step refused", result.message);
      case "Unavailable":
        throw new ApiError({
          status: 503,
          slug: "backend-unavailable",
          title: "Backend unavailable",
          detail: result.message,
        });
      default: {
        const never: never = result;
        throw new Error(`unhandled task result ${JSON.stringify(never)}`);
      }
    }
  });

  return app;
}

/** Each refusal of the steps rule (core/steps.ts) as its 409 problem. */
function stepProblem(
  reason: Extract<StepPlacement, { readonly kind: "Refused" }>["reason"],
  message: string,
): ApiError {
  switch (reason) {
    case "STEPS_UNSUPPORTED":
      return conflict("tasks-unsupported", "Steps not supported", message);
    case "WORKLOAD_ENDING":
      return conflict("workload-ended", "Workload ending", message);
    case "NO_LIVE_ALLOCATION":
      return conflict("no-live-allocation", "No live allocation", message);
    default: {
      const never: never = reason;
      throw new Error(`unhandled step refusal ${JSON.stringify(never)}`);
    }
  }
}

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
