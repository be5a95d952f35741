/**
 * Answers and output events shrunk to fit one frame: an over-cap frame would cost the whole
 * connection, so large values are left out or cut, and the text says what was lost.
 */
import {
  type CellEvent,
  encodeFrame,
  type MimeBundle,
  type WorkerResponse,
} from "../../wire/worker-protocol.ts";

/**
 * The kernel caps each field, but a cell's output escaped into JSON can still exceed the
 * frame cap, and an over-cap frame would cost the whole connection. Shrink the fields until
 * the answer fits, saying so in the text.
 */
export function fitResponse(
  id: number,
  response: WorkerResponse,
  maxFrameBytes: number,
): WorkerResponse {
  const fits = (r: WorkerResponse) =>
    encodeFrame({ kind: "response", id, response: r }, maxFrameBytes) !== null;
  if (fits(response)) return response;
  if (response.kind === "exec") {
    for (let limit = 256 * 1024; limit >= 1024; limit = Math.floor(limit / 2)) {
      const shrunk = {
        ...response,
        result: response.result === null ? null : shrinkBundle(response.result, limit),
        error:
          response.error === null
            ? null
            : {
                ename: clip(response.error.ename, limit),
                evalue: clip(response.error.evalue, limit),
                traceback: clip(response.error.traceback, limit),
              },
      };
      if (fits(shrunk)) return shrunk;
    }
  }
  return { kind: "error", message: "the answer does not fit in a frame" };
}

/** As fitResponse, for one output event: large MIME values go first, then text is cut. */
export function fitEvent(event: CellEvent, maxFrameBytes: number): CellEvent {
  const fits = (e: CellEvent) =>
    encodeFrame({ kind: "event", id: Number.MAX_SAFE_INTEGER, event: e }, maxFrameBytes) !== null;
  if (fits(event) || event.type === "kernel") return event; // a kernel event is bounded
  for (let limit = 256 * 1024; limit >= 1024; limit = Math.floor(limit / 2)) {
    const shrunk: CellEvent =
      event.type === "stream"
        ? { ...event, text: clip(event.text, limit) }
        : event.type === "display_data"
          ? { ...event, data: shrinkBundle(event.data, limit) }
          : shrinkJupyter(event, limit);
    if (fits(shrunk)) return shrunk;
  }
  return { type: "stream", name: "stderr", text: "[an output did not fit in a frame]\n" };
}

/** A Jupyter message's bundle (`data`) shrunk as a display's; other content is the kernel's. */
function shrinkJupyter(event: Extract<CellEvent, { type: "jupyter" }>, limit: number): CellEvent {
  const data = event.content["data"];
  if (typeof data !== "object" || data === null) return event;
  const text: Record<string, string> = {};
  for (const [mime, value] of Object.entries(data)) {
    text[mime] = typeof value === "string" ? value : JSON.stringify(value);
  }
  return { ...event, content: { ...event.content, data: shrinkBundle(text, limit) } };
}

/** Values over `limit` are left out, and text/plain says which, so loss is never silent. */
function shrinkBundle(bundle: MimeBundle, limit: number): MimeBundle {
  const kept: Record<string, string> = {};
  const omitted: string[] = [];
  for (const [mime, value] of Object.entries(bundle)) {
    if (mime === "text/plain") continue;
    if (value.length > limit) omitted.push(`${mime} of ${value.length} characters`);
    else kept[mime] = value;
  }
  const note = omitted.length > 0 ? `\n[output not shown: ${omitted.join(", ")}, too large]` : "";
  kept["text/plain"] = clip(bundle["text/plain"] ?? "", limit) + note;
  return kept;
}

function clip(text: string, limit: number): string {
  return text.length <= limit
    ? text
    : `${text.slice(0, limit)}\n[... ${text.length - limit} more characters not shown]`;
}
