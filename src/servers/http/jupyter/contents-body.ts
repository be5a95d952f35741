/**
 * A contents save's body: a whole notebook or file as JSON, so larger than the API's 1 MiB
 * body cap (a notebook with a few figures is several MB). Bounded by the upload cap plus
 * what base64 and JSON add, and by the listener's body timeout, as every body is.
 */
import type { Context } from "hono";
import { withDeadline } from "../../../lib/clock.ts";
import type { ApiEnv } from "../deps.ts";
import { ApiError, validationFailed } from "../problem.ts";
import { DEFAULT_BODY_TIMEOUT_MS, refuseNonJsonBody } from "../validation.ts";

/** base64 is 4/3 of the bytes; JSON escapes and a notebook's keys add the rest. */
const OVERHEAD_BYTES = 1024 * 1024;

function tooLarge(maxBytes: number): ApiError {
  return new ApiError({
    status: 413,
    slug: "payload-too-large",
    title: "Save too large",
    detail: `the body is larger than a save takes (${maxBytes} bytes; serve --max-upload-size): upload large files with the files API or openai4s cp`,
  });
}

export async function readContentsBody(
  c: Context<ApiEnv>,
  maxUploadBytes: number,
): Promise<unknown> {
  // The same rule as every other body, from the same function (validation.ts).
  refuseNonJsonBody(c);
  const maxBytes = Math.ceil((maxUploadBytes * 4) / 3) + OVERHEAD_BYTES;
  if (Number(c.req.header("content-length") ?? "0") > maxBytes) throw tooLarge(maxBytes);
  const reader = c.req.raw.body?.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const idleMs = c.env?.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
  while (reader !== undefined) {
    const reading = reader.read();
    const outcome = await withDeadline(reading, idleMs, () => "stalled" as const);
    if (outcome === "stalled") {
      reading.catch(() => {});
      reader.cancel().catch(() => {});
      throw new ApiError({
        status: 408,
        slug: "request-timeout",
        title: "Request timeout",
        detail: `no body arrived for ${idleMs} ms`,
      });
    }
    if (outcome.done) break;
    total += outcome.value.byteLength;
    if (total > maxBytes) {
      reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(outcome.value);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw validationFailed([{ path: "", message: `body is not valid JSON: ${String(error)}` }]);
  }
}
