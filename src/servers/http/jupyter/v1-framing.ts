/**
 * Jupyter's `v1.kernel.websocket.jupyter.org` subprotocol: one binary frame per message, a
 * little-endian uint64 count of offsets, the offsets, then channel, header, parent header,
 * metadata and content (JSON), then any buffers. JupyterLab offers it, and Bun's server
 * selects an offered protocol by itself, so a connection that offered it speaks it.
 *
 * The JSON framing's own binary message (a message with buffers, as Jupyter Server sends it
 * and jupyter_server's gateway client relays it) is here too: jsonFraming, binaryToJson.
 * Inside the daemon a message is the JSON framing's text, its buffers base64 in `buffers`.
 */
export const V1_PROTOCOL = "v1.kernel.websocket.jupyter.org";

const decoder = new TextDecoder("utf-8");
const encoder = new TextEncoder();

/** The message as the JSON framing's text, or null when the frame is not one. */
export function v1ToJson(frame: Uint8Array): string | null {
  try {
    const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
    const count = Number(view.getBigUint64(0, true));
    if (count < 6 || count > 1000 || 8 * (count + 1) > frame.byteLength) return null;
    const offsets: number[] = [];
    for (let i = 0; i < count; i++) offsets.push(Number(view.getBigUint64(8 * (i + 1), true)));
    // `count` offsets bound count - 1 parts: five of the message, then its buffers.
    const bytes = (i: number) => frame.subarray(offsets[i], offsets[i + 1]);
    const part = (i: number) => decoder.decode(bytes(i));
    const buffers: string[] = [];
    for (let i = 5; i < count - 1; i++) buffers.push(Buffer.from(bytes(i)).toString("base64"));
    return JSON.stringify({
      channel: part(0),
      header: JSON.parse(part(1)),
      parent_header: JSON.parse(part(2)),
      metadata: JSON.parse(part(3)),
      content: JSON.parse(part(4)),
      buffers,
    });
  } catch {
    return null;
  }
}

/** A message of the JSON framing (as the hub builds it, buffers base64) as one v1 frame. */
export function jsonToV1(text: string): Uint8Array {
  const m = JSON.parse(text) as Record<string, unknown>;
  const buffers = Array.isArray(m["buffers"]) ? m["buffers"] : [];
  const parts = [
    encoder.encode(String(m["channel"])),
    encoder.encode(JSON.stringify(m["header"])),
    encoder.encode(JSON.stringify(m["parent_header"] ?? {})),
    encoder.encode(JSON.stringify(m["metadata"] ?? {})),
    encoder.encode(JSON.stringify(m["content"] ?? {})),
    ...buffers.map((b) => new Uint8Array(Buffer.from(String(b), "base64"))),
  ];
  const count = parts.length + 1;
  const head = 8 * (count + 1);
  const total = head + parts.reduce((n, p) => n + p.length, 0);
  const frame = new Uint8Array(total);
  const view = new DataView(frame.buffer);
  view.setBigUint64(0, BigInt(count), true);
  let offset = head;
  parts.forEach((p, i) => {
    view.setBigUint64(8 * (i + 1), BigInt(offset), true);
    frame.set(p, offset);
    offset += p.length;
  });
  view.setBigUint64(8 * count, BigInt(offset), true);
  return frame;
}

/**
 * A message for a socket of the JSON framing: its text, or, when it carries binary buffers,
 * the binary message Jupyter Server sends then (and jupyter_server's gateway client passes
 * on): a big-endian uint32 count of parts, each part's offset, the message as JSON (buffers
 * left out), then the buffers.
 */
export function jsonFraming(text: string): string | Uint8Array {
  if (!text.includes('"buffers":["')) return text;
  const { buffers, ...m } = JSON.parse(text) as Record<string, unknown>;
  const parts = [
    encoder.encode(JSON.stringify(m)),
    ...(Array.isArray(buffers) ? buffers : []).map((b) => Buffer.from(String(b), "base64")),
  ];
  const head = 4 * (parts.length + 1);
  const frame = new Uint8Array(head + parts.reduce((n, p) => n + p.length, 0));
  const view = new DataView(frame.buffer);
  view.setUint32(0, parts.length);
  let offset = head;
  parts.forEach((p, i) => {
    view.setUint32(4 * (i + 1), offset);
    frame.set(p, offset);
    offset += p.length;
  });
  return frame;
}

/**
 * A binary message of the JSON framing (as jsonFraming makes them) as text, buffers base64;
 * null when the frame is not one (a client that sent its JSON text as a binary frame).
 */
export function binaryToJson(frame: Uint8Array): string | null {
  try {
    const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
    const count = view.getUint32(0);
    if (count < 1 || count > 1000 || 4 * (count + 1) > frame.byteLength) return null;
    const offsets: number[] = [];
    for (let i = 0; i < count; i++) offsets.push(view.getUint32(4 * (i + 1)));
    offsets.push(frame.byteLength);
    const bytes = (i: number) => frame.subarray(offsets[i], offsets[i + 1]);
    const m = JSON.parse(decoder.decode(bytes(0))) as Record<string, unknown>;
    const buffers: string[] = [];
    for (let i = 1; i < count; i++) buffers.push(Buffer.from(bytes(i)).toString("base64"));
    return JSON.stringify({ ...m, buffers });
  } catch {
    return null;
  }
}
