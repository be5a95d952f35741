/**
 * Jupyter messages on the websocket (messaging protocol 5.3, the JSON framing Jupyter Server
 * uses: one message per text frame, its channel in `channel`). What a client sends is parsed
 * into what the hub needs; what the daemon sends is built here, headers and all.
 */
import { randomUUID } from "node:crypto";
import * as v from "valibot";

export const PROTOCOL_VERSION = "5.3";
export type Channel = "shell" | "control" | "stdin" | "iopub";

const HeaderSchema = v.looseObject({
  msg_id: v.pipe(v.string(), v.maxLength(200)),
  msg_type: v.pipe(v.string(), v.maxLength(100)),
  session: v.optional(v.pipe(v.string(), v.maxLength(200))),
  username: v.optional(v.string()),
});

const ClientMessageSchema = v.looseObject({
  header: HeaderSchema,
  content: v.optional(v.record(v.string(), v.unknown()), {}),
  /**
   * jupyter_server 1.x's gateway client forwards messages without it; a stock Jupyter
   * Server routes those as shell (its `channel` default), so nbconvert through a gateway-mode
   * server does not time out on 117 dropped requests.
   */
  channel: v.optional(v.picklist(["shell", "control", "stdin"]), "shell"),
  /** Base64, as v1ToJson puts a binary frame's buffers; a JSON frame's are not carried. */
  buffers: v.optional(v.pipe(v.array(v.unknown()), v.maxLength(100))),
  /** Read for `openai4s.max_output_chars` only; anything else a client sets is ignored. */
  metadata: v.optional(v.unknown()),
});

/**
 * A cell's own output cap, from its message's `metadata.openai4s.max_output_chars` (a
 * positive whole number); anything else there is no cap of its own. Only lowers the
 * profile's cap (the kernel takes the smaller).
 */
function capOf(metadata: unknown): { readonly maxOutputChars?: number } {
  if (typeof metadata !== "object" || metadata === null) return {};
  const ours = (metadata as Record<string, unknown>)["openai4s"];
  if (typeof ours !== "object" || ours === null) return {};
  const value = (ours as Record<string, unknown>)["max_output_chars"];
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0
    ? { maxOutputChars: value }
    : {};
}

export type Header = Readonly<Record<string, unknown>>;

export interface ClientMessage {
  readonly channel: "shell" | "control" | "stdin";
  readonly msgType: string;
  readonly header: Header;
  readonly content: Readonly<Record<string, unknown>>;
  /** Binary buffers (a comm message's), base64. */
  readonly buffers: readonly string[];
  /** metadata.openai4s.max_output_chars: this cell's lower output cap. */
  readonly maxOutputChars?: number;
}

/** A client's message, or why it is not one (the socket is then told, not dropped). */
export function parseClientMessage(text: string): ClientMessage | string {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return "not JSON";
  }
  const parsed = v.safeParse(ClientMessageSchema, raw);
  if (!parsed.success) return "not a Jupyter message (header, content, channel)";
  const m = parsed.output;
  const buffers = (m.buffers ?? []).filter((b): b is string => typeof b === "string");
  return {
    channel: m.channel,
    msgType: m.header.msg_type,
    header: m.header,
    content: m.content,
    buffers,
    ...capOf(m.metadata),
  };
}

/** A message from the kernel side, parented to `parent` (a request's header, or {}). */
export function kernelMessage(
  channel: Channel,
  msgType: string,
  content: Readonly<Record<string, unknown>>,
  parent: Header,
  kernelSession: string,
  metadata: Readonly<Record<string, unknown>> = {},
  buffers: readonly string[] = [],
): string {
  const header = {
    msg_id: randomUUID(),
    msg_type: msgType,
    username: "openai4s",
    session: kernelSession,
    date: new Date().toISOString(),
    version: PROTOCOL_VERSION,
  };
  return JSON.stringify({
    header,
    msg_id: header.msg_id,
    msg_type: msgType,
    parent_header: parent,
    metadata,
    content,
    buffers,
    channel,
  });
}

/** `execute_request` → `execute_reply`; anything else that is no request → `error_reply`. */
export function replyType(msgType: string): string {
  return msgType.endsWith("_request")
    ? `${msgType.slice(0, -"_request".length)}_reply`
    : "error_reply";
}

/** A native bundle (JSON as text) as Jupyter wants it (JSON as JSON). */
export function jupyterBundle(data: Readonly<Record<string, string>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [mime, value] of Object.entries(data)) {
    if (mime === "application/json" || mime.endsWith("+json")) {
      try {
        out[mime] = JSON.parse(value);
        continue;
      } catch {
        // not JSON after all: passed on as the text it is
      }
    }
    out[mime] = value;
  }
  return out;
}
