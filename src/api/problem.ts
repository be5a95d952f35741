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
  readonly errors: readonly FieldError[];
  readonly [extension: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** Problem types are URNs: stable identifiers clients can switch on, not documentation URLs. */
export function problemType(slug: string): string {
  return `urn:openai4s:problem:${slug}`;
}

export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: ContentfulStatusCode;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly errors: readonly FieldError[];
  /** Extra top-level members, e.g. `reason: "ISOLATION_UNAVAILABLE"`. */
  readonly extensions: Readonly<Record<string, unknown>>;

  constructor(init: {
    readonly status: ContentfulStatusCode;
    readonly slug: string;
    readonly title: string;
    readonly detail: string;
    readonly errors?: readonly FieldError[];
    readonly extensions?: Readonly<Record<string, unknown>>;
  }) {
    super(init.detail);
    this.status = init.status;
    this.type = problemType(init.slug);
    this.title = init.title;
    this.detail = init.detail;
    this.errors = init.errors ?? [];
    this.extensions = init.extensions ?? {};
  }

  body(): ProblemBody {
    return {
      ...this.extensions,
      type: this.type,
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

export function conflict(slug: string, title: string, detail: string): ApiError {
  return new ApiError({ status: 409, slug, title, detail });
}

export function internalError(): ApiError {
  return new ApiError({
    status: 500,
    slug: "internal-error",
    title: "Internal error",
    detail: "the daemon failed to handle this request; its log has the details",
  });
}
