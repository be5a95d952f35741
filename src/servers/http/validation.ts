/**
 * Request reading and valibot issue rendering. Every body goes through `readBody`: size
 * bound, JSON, schema (strict objects, so an unknown field is a named 400, never ignored),
 * all issues reported at once so a client fixes its request in one round trip.
 */
import type { Context } from "hono";
import * as v from "valibot";
import type { Timers } from "../../lib/clock.ts";
import type { ApiBindings, ApiEnv } from "./deps.ts";
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
 * Whether a declared Content-Type may carry this API's JSON: JSON itself (`+json` types
 * included) or no type at all. `text/plain` and form-urlencoded are refused although
 * `fetch` and `curl -d` send them by default: a body declared as text or a form is a client
 * that believes it sends something else, and guessing that it meant JSON is how a form post
 * from a browser page becomes a command (the API names Content-Type so the fix is one flag).
 */
function acceptsAsJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const media = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  return media === "" || media === "application/json" || media.endsWith("+json");
}

/**
 * The one body-type rule of every JSON route (readJson, the contents API's large reader): a
 * form or text body is a 415, except a Jupyter client's under /api/ with its token in a header.
 */
export function refuseNonJsonBody(c: Context): void {
  const contentType = c.req.header("content-type");
  if (acceptsAsJson(contentType) || jupyterClientWithToken(c)) return;
  throw new ApiError({
    status: 415,
    slug: "unsupported-media-type",
    title: "Unsupported media type",
    detail: `the body must be JSON (Content-Type: application/json), not ${JSON.stringify(contentType)}`,
    errors: [{ path: "Content-Type", message: "must be application/json" }],
  });
}

/**
 * A Jupyter client (under /api/) that put its token in a header: JupyterLab's services send
 * their JSON typed `text/plain;charset=UTF-8` from Node and browsers, and a stock Jupyter
 * Server parses it as JSON. A browser page cannot forge the header on a cross-site form post,
 * so the body is read as JSON whatever its type; a request that relies on the socket's file
 * mode (no header) keeps the Content-Type check above.
 */
function jupyterClientWithToken(c: Context): boolean {
  if (c.req.path !== "/api" && !c.req.path.startsWith("/api/")) return false;
  return /^\s*(token|bearer)\s+\S+\s*$/i.test(c.req.header("authorization") ?? "");
}

/** How long a listener waits for a request body when it did not say (bindings). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;

/**
 * The body's bytes, at most `MAX_BODY_BYTES` and within `timeoutMs` from the first read. A
 * client whose body stops arriving would otherwise hold the handler and its connection for
 * as long as it likes (on the unix socket, which has no idle timeout, forever).
 */
async function readBodyBytes(
  request: Request,
  timeoutMs: number,
  timers: Timers,
): Promise<Uint8Array> {
  const reader = request.body?.getReader();
  if (reader === undefined) return new Uint8Array();
  let cancelTimer = () => {};
  const expired = new Promise<"expired">((resolve) => {
    cancelTimer = timers.after(timeoutMs, () => resolve("expired"));
  });
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const reading = reader.read();
      const outcome = await Promise.race([reading, expired]);
      if (outcome === "expired") {
        // The read still pending rejects once the connection closes; nobody awaits it.
        reading.catch(() => {});
        reader.cancel().catch(() => {});
        throw requestTimeout(timeoutMs);
      }
      if (outcome.done) break;
      total += outcome.value.byteLength;
      if (total > MAX_BODY_BYTES) {
        reader.cancel().catch(() => {});
        throw bodyTooLarge();
      }
      chunks.push(outcome.value);
    }
  } finally {
    cancelTimer();
  }
  return Buffer.concat(chunks);
}

/** The body as text; bytes that are not UTF-8 are refused, never replaced by U+FFFD. */
function decodeUtf8(bytes: Uint8Array): { readonly text: string; readonly valid: boolean } {
  try {
    return { text: new TextDecoder("utf-8", { fatal: true }).decode(bytes), valid: true };
  } catch {
    return { text: new TextDecoder("utf-8").decode(bytes), valid: false };
  }
}

/**
 * Every string (key or value) of a parsed body that is not well-formed UTF-16, i.e. holds a
 * lone surrogate (`"\ud800"` is valid JSON). Such a string cannot be encoded as UTF-8 into
 * argv, the store or a log without being silently altered. With `replaced`, strings holding
 * U+FFFD are named too: they are where the invalid bytes of the raw body were.
 */
function malformedStrings(root: unknown, replaced: boolean): FieldError[] {
  const bad = (s: string) => !s.isWellFormed() || (replaced && s.includes("\uFFFD"));
  const message = replaced
    ? "must be valid UTF-8"
    : "must be valid UTF-8 (it holds a lone surrogate)";
  const out: FieldError[] = [];
  // A loop, not recursion: a 1 MiB body can nest arrays 500,000 deep, past the call stack.
  const pending: { readonly value: unknown; readonly path: string }[] = [{ value: root, path: "" }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path } = next;
    if (typeof value === "string") {
      if (bad(value)) out.push({ path, message });
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    const isArray = Array.isArray(value);
    for (const [key, item] of Object.entries(value)) {
      const at = isArray ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`;
      if (!isArray && bad(key)) out.push({ path: at, message: `name ${message}` });
      pending.push({ value: item, path: at });
    }
  }
  // Sorted by path: the same request names its fields in the same order every time.
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Did the client announce a body (a length, or chunked)? The runtime gives a request
 * without one a null body; headers are checked too, for a body still on its way.
 */
export function declaresBody(request: Request): boolean {
  return (
    request.body !== null ||
    request.headers.has("transfer-encoding") ||
    Number(request.headers.get("content-length") ?? "0") > 0
  );
}

/**
 * The raw JSON value of the body, bounded in size and time, as well-formed UTF-8. With
 * `emptyIsNone`, an empty body reads as `{}` (routes that take none).
 */
export async function readJson(
  c: Context,
  options: { readonly emptyIsNone?: boolean } = {},
): Promise<unknown> {
  refuseNonJsonBody(c);
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw bodyTooLarge();
  const bindings = c.env as ApiBindings | undefined;
  // Set by the app's first middleware: a route mounted outside createApp has no deadline to
  // wait on, which is a wiring bug, not a client's.
  const timers = (c as Context<ApiEnv>).get("apiTimers");
  if (timers === undefined)
    throw new Error("readJson: no timers on the context (not under createApp)");
  const bytes = await readBodyBytes(
    c.req.raw,
    bindings?.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
    timers,
  );
  const { text, valid } = decodeUtf8(bytes);
  if (text.trim() === "") {
    if (options.emptyIsNone === true) return {};
    throw validationFailed([{ path: "", message: "a JSON object body is required" }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const why = valid ? `body is not valid JSON: ${String(error)}` : "body is not valid UTF-8";
    throw validationFailed([{ path: "", message: why }]);
  }
  // Every body of this API is an object; valibot's object schemas would accept an array
  // (typeof "object") and report its indices as unknown keys, which names nothing useful.
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw validationFailed([{ path: "", message: "the body must be a JSON object" }]);
  }
  const malformed = malformedStrings(value, !valid);
  if (malformed.length > 0) throw validationFailed(malformed);
  // Invalid bytes outside any string (between tokens) break JSON.parse above; inside one
  // they are named there. Nothing invalid may pass unnamed.
  if (!valid) throw validationFailed([{ path: "", message: "body is not valid UTF-8" }]);
  return value;
}

export async function readBody<const S extends v.GenericSchema>(
  c: Context,
  schema: S,
): Promise<v.InferOutput<S>> {
  return parseWith(schema, await readJson(c));
}

function requestTimeout(timeoutMs: number): ApiError {
  return new ApiError({
    status: 408,
    slug: "request-timeout",
    title: "Request timeout",
    detail: `the request body did not arrive within ${timeoutMs} ms`,
  });
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
