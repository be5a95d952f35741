/**
 * Request reading and valibot issue rendering. Every body goes through `readBody`: size
 * bound, JSON, schema (strict objects, so an unknown field is a named 400, never ignored),
 * all issues reported at once so a client fixes its request in one round trip.
 */
import type { Context } from "hono";
import * as v from "valibot";
import { ApiError, type FieldError, validationFailed } from "./problem.ts";

/** No request body this API accepts is legitimately larger; bigger is a mistake or abuse. */
const MAX_BODY_BYTES = 1024 * 1024;

/** `command[0]`, `env.PATH`, `kind`; the empty string names the body itself. */
function issuePath(issue: v.BaseIssue<unknown>): string {
  let out = "";
  for (const item of issue.path ?? []) {
    const key = (item as { readonly key: unknown }).key;
    if (typeof key === "number") out += `[${key}]`;
    else out += out.length === 0 ? String(key) : `.${String(key)}`;
  }
  return out;
}

function issuesToErrors(issues: readonly v.BaseIssue<unknown>[]): FieldError[] {
  return issues.map((issue) => {
    const path = issuePath(issue);
    // valibot reports both an unknown key and a missing one as a strict_object issue; only
    // the expectation tells them apart ("never" for a key that must not be there). Calling
    // a missing `profile` "unknown" sends the client looking for a typo that is not there.
    if (issue.type === "strict_object" && path !== "") {
      const field = path.split(".").at(-1);
      return issue.expected === "never"
        ? { path, message: `unknown field "${field}"` }
        : { path, message: `required field "${field}" is missing` };
    }
    return { path, message: issue.message };
  });
}

export function parseWith<const S extends v.GenericSchema>(
  schema: S,
  input: unknown,
): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (!result.success) throw validationFailed(issuesToErrors(result.issues));
  return result.output;
}

/**
 * Whether a declared Content-Type may carry this API's JSON. Besides JSON itself, the two
 * types common clients send by default for a string body (`fetch`: text/plain, `curl -d`:
 * form-urlencoded) and no type at all: refusing those would break the usual first try for
 * no safety, since the body must parse as a JSON object anyway. A type that names another
 * format (XML, multipart) says the client sends something else: refused, not guessed at.
 */
function acceptsAsJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const media = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  return (
    media === "" ||
    media === "application/json" ||
    media.endsWith("+json") ||
    media === "text/plain" ||
    media === "application/x-www-form-urlencoded"
  );
}

/** The raw JSON value of the body, bounded in size. */
export async function readJson(c: Context): Promise<unknown> {
  const contentType = c.req.header("content-type");
  if (!acceptsAsJson(contentType)) {
    throw new ApiError({
      status: 415,
      slug: "unsupported-media-type",
      title: "Unsupported media type",
      detail: `the body must be JSON (Content-Type: application/json), not ${JSON.stringify(contentType)}`,
      errors: [{ path: "Content-Type", message: "must be application/json" }],
    });
  }
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw bodyTooLarge();
  const text = await c.req.text();
  if (Buffer.byteLength(text) > MAX_BODY_BYTES) throw bodyTooLarge();
  if (text.trim() === "") {
    throw validationFailed([{ path: "", message: "a JSON object body is required" }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw validationFailed([{ path: "", message: `body is not valid JSON: ${String(error)}` }]);
  }
  // Every body of this API is an object; valibot's object schemas would accept an array
  // (typeof "object") and report its indices as unknown keys, which names nothing useful.
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw validationFailed([{ path: "", message: "the body must be a JSON object" }]);
  }
  return value;
}

export async function readBody<const S extends v.GenericSchema>(
  c: Context,
  schema: S,
): Promise<v.InferOutput<S>> {
  return parseWith(schema, await readJson(c));
}

function bodyTooLarge(): ApiError {
  return new ApiError({
    status: 413,
    slug: "payload-too-large",
    title: "Request body too large",
    detail: `the body is larger than ${MAX_BODY_BYTES} bytes`,
  });
}

/** A string with no NUL: NUL truncates argv and environment entries at the exec boundary. */
export function noNul(what: string) {
  return v.check((s: string) => !s.includes("\0"), `${what} must not contain NUL`);
}
