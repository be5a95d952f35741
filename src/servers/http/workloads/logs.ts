/**
 * `GET /v1/workloads/{id}/logs`: a job's stdout or stderr, as bytes, from the file the
 * backend writes (found only through the state layout). With `follow` the response is
 * streamed with chunked transfer while the attempt runs and ends when it has ended.
 */
import { Hono } from "hono";
import { getWorkload, listAllocations } from "../../../adapters/store-sqlite/index.ts";
import { type Allocation, isTerminal, type Workload } from "../../../core/models.ts";
import { sleep } from "../../../lib/clock.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError, notFound, validationFailed } from "../problem.ts";
import { parseWith } from "../validation.ts";
import { type FollowTarget, logStream, openLog, tailOffset } from "./log-stream.ts";
import { LogsQuery } from "./schemas.ts";

const DEFAULT_POLL_MS = 250;

export function logNotFound(detail: string): ApiError {
  return new ApiError({ status: 404, slug: "log-not-found", title: "No such log", detail });
}

/** The attempt asked for (its epoch), else the latest; null when there is none (yet). */
export function chooseAttempt(
  allocations: readonly Allocation[],
  attempt: number | undefined,
): Allocation | null {
  if (attempt !== undefined) return allocations.find((a) => a.epoch === attempt) ?? null;
  let latest: Allocation | null = null;
  for (const a of allocations) if (latest === null || a.epoch > latest.epoch) latest = a;
  return latest;
}

function badIndex(message: string): ApiError {
  return validationFailed([{ path: "index", message }]);
}

/**
 * Which element's log: a job array's logs are one per element, so the index is required
 * and must be one of its elements; any other workload has one log and refuses an index.
 */
export function elementIndex(
  id: string,
  attempt: Allocation | null,
  index: number | undefined,
): number | null {
  const size = attempt?.arraySize ?? null;
  if (size === null) {
    if (index !== undefined) throw badIndex(`workload ${id} is not a job array`);
    return null;
  }
  if (index === undefined || index >= size) {
    throw badIndex(`workload ${id} is a job array of ${size} elements: give index 0..${size - 1}`);
  }
  return index;
}

export function createLogRoutes(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();
  const pollMs = deps.logPollMs ?? DEFAULT_POLL_MS;

  app.get("/v1/workloads/:id/logs", async function logs(c) {
    const id = c.req.param("id");
    const query = parseWith(LogsQuery, c.req.query());
    const workload = getWorkload(deps.store, id);
    if (!workload) throw notFound(`no workload ${JSON.stringify(id)}`);
    const stream = query.stream ?? "stdout";
    const follow = query.follow ?? false;
    const attempt = chooseAttempt(listAllocations(deps.store, id), query.attempt);
    if (attempt === null && (query.attempt !== undefined || !follow)) {
      throw logNotFound(
        query.attempt !== undefined
          ? `workload ${id} has no attempt ${query.attempt}`
          : `workload ${id} has no attempt yet (it is ${workload.phase}); --follow waits for one`,
      );
    }
    const index = elementIndex(id, attempt, query.index);
    const target = followTarget(deps, workload, attempt, stream, index);
    const path = target.path();
    const first = path === null ? ({ kind: "Missing" } as const) : await openLog(path);
    if (first.kind === "NotAFile") {
      // Only the job could have put it there; say so without following it anywhere.
      throw logNotFound(`the ${stream} log of workload ${id} is not a regular file`);
    }
    if (first.kind === "Missing" && !follow) {
      throw logNotFound(
        `workload ${id} attempt ${attempt?.epoch ?? "?"} has no ${stream} log (yet): it is written once the job starts`,
      );
    }
    const headers = {
      // Job output is arbitrary bytes; the client decides how to show them.
      "Content-Type": "text/plain; charset=utf-8",
      "X-Content-Type-Options": "nosniff",
      "Cache-Control": "no-store",
      // A followed log is a long, often quiet stream: proxies must not buffer it, and the
      // daemon lifts its idle timeout for such answers (see daemon.ts).
      ...(follow ? { "X-Accel-Buffering": "no" } : {}),
    };
    if (c.req.method === "HEAD") {
      // Hono answers HEAD with the GET route and drops the body without cancelling it: a
      // stream over the open file would keep its handle until garbage collection.
      if (first.kind === "Opened") await first.handle.close();
      return new Response(null, { status: 200, headers });
    }
    const tail = query.tail;
    const body = logStream(target, first, {
      follow,
      pollMs,
      sleep: (ms) => sleep(ms),
      startOffset: (handle, size) =>
        tail === undefined ? Promise.resolve(0) : tailOffset(handle, size, tail),
    });
    return new Response(body, { status: 200, headers });
  });

  return app;
}

/**
 * What a followed log reads from the store on each poll: the attempt once one exists (fixed
 * from then on: a later retry is another attempt, with its own log), and whether it ended.
 */
export function followTarget(
  deps: ApiDeps,
  workload: Workload,
  chosen: Allocation | null,
  stream: "stdout" | "stderr",
  index: number | null,
): FollowTarget {
  // An element's log sits beside the attempt's, suffixed with its index (a number we
  // checked, never a name a job chose).
  const suffix = index === null ? "" : `.${index}`;
  let attempt = chosen;
  const refresh = (): void => {
    const all = listAllocations(deps.store, workload.id);
    attempt =
      attempt === null
        ? chooseAttempt(all, undefined)
        : (all.find((a) => a.id === attempt?.id) ?? attempt);
  };
  return {
    path() {
      if (attempt === null) refresh();
      return attempt === null ? null : `${deps.logFile(workload.id, attempt.id, stream)}${suffix}`;
    },
    ended() {
      refresh();
      if (attempt !== null) return isTerminal(attempt.phase);
      const now = getWorkload(deps.store, workload.id);
      return now === undefined || now === null || isTerminal(now.phase);
    },
  };
}
