/**
 * The workload routes: submit, list, show, events, cancel and steps; the session routes
 * (exec, cell events, interrupt, restart) are registered from session-routes.ts. Handlers
 * are named functions so a stack trace or a route listing says which one ran.
 */
import { type Context, Hono } from "hono";
import {
  getWorkload,
  listAllocations,
  listConditions,
  listEvents,
  releaseWorkload,
  requestStop,
} from "../../../adapters/store-sqlite/index.ts";
import type { Workload } from "../../../core/models.ts";
import { type Caller, listScope } from "../../../core/principals.ts";
import { eventFor, workloadFor } from "../../../core/scheduler-words.ts";
import { placeStep, type StepPlacement } from "../../../core/steps.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError, conflict, notFound, validationFailed } from "../problem.ts";
import { submitterFor } from "../submitter.ts";
import { parseWith, readBody, readJson } from "../validation.ts";
import { eventView, type PhaseConfirmedAt, type WorkloadView, workloadView } from "../views.ts";
import { decodeCursor, encodeCursor } from "./cursor.ts";
import { LIMITS, ListQuery, SubmitBody, TaskBody } from "./schemas.ts";
import { registerSessionRoutes } from "./session-routes.ts";
import { normalize, parseIdempotencyKey, submitWorkload } from "./submit.ts";
import { createWorkloadViewCache, type JsonBytes, joinJsonBytes } from "./view-cache.ts";

/**
 * Below the spool's low-water mark nothing new is admitted (issue 18: a full spool made the
 * next job fail with an empty log as if its code were wrong). After validation, so a bad
 * body still hears what is wrong with it; before anything is written.
 */
export function refuseWhenSpoolLow(deps: ApiDeps): void {
  // The state dir first: with no room for the store's row or the job's records, an
  // acknowledged job could not be kept (issue 33: jobs that ran ended LOST).
  const state = deps.stateDirSpace?.report();
  if (state?.low === true) {
    throw new ApiError({
      status: 503,
      slug: "state-dir-full",
      title: "State dir full",
      detail: state.message ?? `the state dir ${state.path} is below its low-water mark`,
      extensions: { freeBytes: state.freeBytes, lowWaterBytes: state.lowWaterBytes },
    });
  }
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
  const app = new Hono<ApiEnv>();

  const confirmed: PhaseConfirmedAt = (allocationId) =>
    deps.reconciler.phaseConfirmedAt?.(allocationId) ?? null;

  /** The caller's view: the message in its form (core/scheduler-words.ts). */
  function view(workload: Workload, caller: Caller): WorkloadView {
    return workloadView(
      workloadFor(caller, workload),
      listConditions(deps.store, workload.id),
      listAllocations(deps.store, workload.id),
      deps.clock.now(),
      confirmed,
    );
  }

  // Per app, not per module: each daemon (and each test's app) has its own store.
  const views = createWorkloadViewCache(deps.store, { confirmed, log: deps.log });
  /** Already-serialized JSON, sent as `c.json` would send it. */
  const jsonText = (c: Context<ApiEnv>, text: string) =>
    c.body(text, 200, { "Content-Type": "application/json" });
  const jsonBytes = (c: Context<ApiEnv>, bytes: JsonBytes) =>
    c.body(bytes, 200, { "Content-Type": "application/json" });

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
    const outcome = await submitWorkload(
      deps,
      submission,
      key,
      submitterFor(deps, c.get("caller")),
    );
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
        c.set("createdWorkload", outcome.workload.id);
        return c.json(body, 201);
      }
      case "Replayed":
        c.set("createdWorkload", outcome.workload.id);
        return c.json(view(outcome.workload, c.get("caller")), 200);
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
    const owner = listScope(caller).owner ?? query.owner;
    if (caller.kind === "Principal" && query.owner !== undefined && query.owner !== owner) {
      return jsonText(c, `{"items":[],"nextCursor":null}`);
    }
    // Cached serialized views; the misses come from batched statements (view-cache.ts).
    const page = views.listBytes(
      {
        ...(owner !== undefined ? { owner } : {}),
        limit: query.limit ?? LIMITS.listLimitDefault,
        ...(query.kind !== undefined ? { kind: query.kind } : {}),
        ...(query.phase !== undefined ? { phase: query.phase } : {}),
        ...(query.backendJobId !== undefined ? { backendJobId: query.backendJobId } : {}),
        ...(cursor !== undefined ? { cursor } : {}),
      },
      caller,
    );
    // The text JSON.stringify({ items, nextCursor }) gives, without re-serializing items.
    const nextCursor = JSON.stringify(page.next ? encodeCursor(page.next) : null);
    return jsonBytes(c, joinJsonBytes(`{"items":[`, page.items, `],"nextCursor":${nextCursor}}`));
  });

  app.get("/v1/workloads/:id", function show(c) {
    const id = c.req.param("id");
    const json = views.showBytes(id, c.get("caller"));
    if (json === null) throw notFound(`no workload ${JSON.stringify(id)}`);
    return jsonBytes(c, json);
  });

  app.get("/v1/workloads/:id/events", function events(c) {
    const workload = mustGet(c);
    // A bare array: INTERFACE.md gives this route no wrapper, unlike the list and profiles.
    const caller = c.get("caller");
    return c.json(listEvents(deps.store, workload.id).map((e) => eventView(eventFor(caller, e))));
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
    return c.json(view(after, c.get("caller")), 202);
  });

  app.post("/v1/workloads/:id/release", function release(c) {
    const workload = mustGet(c);
    const result = releaseWorkload(deps.store, workload.id);
    switch (result.kind) {
      case "NotFound":
        throw notFound(`no workload ${JSON.stringify(workload.id)}`);
      case "Released":
        deps.log.info("released", { workloadId: workload.id });
        deps.reconciler.wake();
        break;
      case "NotHeld":
        // Idempotent: a second release finds it running (or waiting) as the first left it.
        break;
      case "Ended":
        throw conflict(
          "workload-ended",
          "Workload ended",
          `workload ${workload.id} ended ${workload.phase} while held: it can no longer run`,
        );
      default: {
        const never: never = result;
        throw new Error(`unhandled release result ${JSON.stringify(never)}`);
      }
    }
    const after = getWorkload(deps.store, workload.id) ?? workload;
    return c.json(view(after, c.get("caller")), 202);
  });

  registerSessionRoutes(app, deps, mustGet);

  app.post("/v1/workloads/:id/tasks", async function tasks(c) {
    const workload = mustGet(c);
    const body = await readBody(c, TaskBody);
    const placement = placeStep(deps.backend, workload, listAllocations(deps.store, workload.id));
    if (placement.kind === "Refused") throw stepProblem(placement.reason, placement.message);
    const { runner, target } = placement;
    const present = deps.presence.whileRunning(workload.id);
    const result = await runner
      .runTask(target, body.command, {
        timeoutMs: (body.timeoutSeconds ?? LIMITS.taskTimeoutDefaultSeconds) * 1000,
        subject: { profile: workload.profile, owner: workload.owner ?? null },
      })
      .finally(present);
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
