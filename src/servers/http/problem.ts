/**
 * The API's one error type and its one rendering. Every refusal a handler makes is an
 * ApiError; `app.onError` turns it into `application/problem+json` (RFC 9457). Anything
 * else that reaches onError is a bug or broken infrastructure and becomes a 500 whose body
 * says nothing about internals (the log gets the details).
 */
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** One invalid input, named by where it sits in the request (`command[0]`, `env.PATH`). */
export interface FieldError {
  readonly path: string;
  readonly message: string;
}

export interface ProblemBody {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly reason: string;
  readonly errors: readonly FieldError[];
  readonly [extension: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/**
 * Every kind of refusal the API makes, by slug, with what it means. The slug gives the
 * problem's `type` URN and its `reason` (UPPER_SNAKE), a stable value a script can switch
 * on; the OpenAPI document lists them all from here. A new refusal is a new entry: an
 * ApiError cannot be built with a slug this table does not know.
 */
export const PROBLEMS = {
  "validation-failed": "A body field, query parameter or header is invalid; `errors` names each.",
  "not-found": "No such workload, route or session.",
  "log-not-found": "The workload has no such attempt or log (yet), or the log is not a file.",
  "method-not-allowed": "The route exists but not with this method; see the Allow header.",
  unauthorized:
    "A TCP listener needs `Authorization: Bearer` with the admin token or a principal's token.",
  forbidden: "Only the admin may do this (principals and their tokens).",
  "host-refused":
    "The Host header is neither a loopback name nor one the admin allowed (OPENAI4S_ALLOWED_HOSTS): a DNS rebinding page, or a name the admin must add.",
  "cross-site-refused":
    "A state-changing request or websocket from a page of another origin (Origin, Sec-Fetch-Site) not in OPENAI4S_ALLOWED_ORIGINS. Nothing was done.",
  "limit-exceeded":
    "The principal already holds what one of its limits allows; `limit`, `current` and `max` say which. Nothing was created.",
  "audit-disabled": "This daemon keeps no audit log.",
  "already-exists": "A principal with this name or unix user already exists.",
  "account-unusable":
    "The unix user named cannot run work: no such account, root, a system account (below the uid floor), nobody, or in root's group. Nothing was created.",
  "unsupported-media-type":
    "The body is not JSON, or does not say so: a state-changing JSON route needs Content-Type: application/json.",
  "payload-too-large": "The body is larger than the API accepts.",
  "path-refused":
    "A workspace path was refused: absolute, `..`, NUL, too long, or through a symbolic link or a file.",
  "file-not-found": "No such file or directory in the workload's workspace.",
  "file-conflict":
    "The workspace entry is of the wrong kind for the request (a directory where a file was named, or a directory that is not empty).",
  "range-not-satisfiable": "The Range asked for lies outside the file.",
  "idempotency-key-reused": "The Idempotency-Key was first used with a different request.",
  "isolation-unavailable":
    "The workload cannot be isolated: no worker gateway or no verified isolation (sessions), or jobs would run unsandboxed as the daemon's own uid (BATCH).",
  "sessions-disabled": "Sessions are not enabled on this daemon.",
  "not-a-session": "The workload is a BATCH; the operation needs a SESSION.",
  "workload-ended": "The workload has ended or is being stopped.",
  "session-not-ready": "The session is not READY yet; the message names the missing condition.",
  "kernel-not-restarted": "The session's kernel could not be restarted; the message says why.",
  "websocket-required": "This route is a websocket (Jupyter's channels): send Upgrade: websocket.",
  "tasks-unsupported": "The backend cannot run steps inside an allocation.",
  "no-live-allocation": "The workload has no running allocation.",
  "task-refused": "The backend refused to run the step.",
  "backend-unavailable": "The backend did not answer; nothing was changed.",
  "spool-full":
    "The filesystem jobs write to is below its low-water mark of free space; nothing was created. Retry once space returns.",
  "state-dir-full":
    "The daemon's state dir (its store and job records) is below its low-water mark of free space, or a write to it failed for want of space; nothing was created. Retry once space returns.",
  "backup-failed": "The daemon could not write a copy of its store.",
  "request-timeout": "The request body did not arrive in time; the connection is closed.",
  "client-closed-request": "The client went away before the answer (never sent; counted as 499).",
  "internal-error": "The daemon failed; its log has the details.",
} as const satisfies Readonly<Record<string, string>>;

export type ProblemSlug = keyof typeof PROBLEMS;

/** `log-not-found` → `LOG_NOT_FOUND`. */
export function problemReason(slug: ProblemSlug): string {
  return slug.toUpperCase().replaceAll("-", "_");
}

/** Problem types are URNs: stable identifiers clients can switch on, not documentation URLs. */
function problemType(slug: string): string {
  return `urn:openai4s:problem:${slug}`;
}

export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: ContentfulStatusCode;
  readonly type: string;
  /** Stable UPPER_SNAKE code of this refusal (from the slug). */
  readonly reason: string;
  readonly title: string;
  readonly detail: string;
  readonly errors: readonly FieldError[];
  /** Extra top-level members, e.g. `reason: "ISOLATION_UNAVAILABLE"`. */
  readonly extensions: Readonly<Record<string, unknown>>;

  constructor(init: {
    readonly status: ContentfulStatusCode;
    readonly slug: ProblemSlug;
    readonly title: string;
    readonly detail: string;
    readonly errors?: readonly FieldError[];
    readonly extensions?: Readonly<Record<string, unknown>>;
  }) {
    super(init.detail);
    this.status = init.status;
    this.type = problemType(init.slug);
    this.reason = problemReason(init.slug);
    this.title = init.title;
    this.detail = init.detail;
    this.errors = init.errors ?? [];
    this.extensions = init.extensions ?? {};
  }

  body(): ProblemBody {
    return {
      ...this.extensions,
      type: this.type,
      reason: this.reason,
      title: this.title,
      status: this.status,
      detail: this.detail,
      errors: this.errors,
    };
  }
}

export function validationFailed(errors: readonly FieldError[]): ApiError {
  const named = errors.map((e) => e.path || "(body)").join(", ");
  return new ApiError({
    status: 400,
    slug: "validation-failed",
    title: "Invalid request",
    detail: `invalid: ${named}`,
    errors,
  });
}

export function notFound(detail: string): ApiError {
  return new ApiError({ status: 404, slug: "not-found", title: "Not found", detail });
}

export function conflict(slug: ProblemSlug, title: string, detail: string): ApiError {
  return new ApiError({ status: 409, slug, title, detail });
}

/**
 * The client closed the connection (mid-body, a bad chunk size that the runtime rejected):
 * nothing is sent back, and it is not the daemon's failure. 499, nginx's "client closed
 * request", keeps it out of the 5xx an admin alerts on while still counting it.
 */
export function clientClosedRequest(): ApiError {
  return new ApiError({
    status: 499 as ContentfulStatusCode,
    slug: "client-closed-request",
    title: "Client closed request",
    detail: "the client closed the connection before the request was handled",
  });
}

/** Did this error come from the request's own connection going away? */
export function isClientAbort(error: unknown, request: Request): boolean {
  if (request.signal.aborted) return true;
  return error instanceof DOMException && error.name === "AbortError";
}

export function internalError(): ApiError {
  return new ApiError({
    status: 500,
    slug: "internal-error",
    title: "Internal error",
    detail: "the daemon failed to handle this request; its log has the details",
  });
}
