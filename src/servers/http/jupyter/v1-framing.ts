/**
 * Jupyter's `v1.kernel.websocket.jupyter.org` subprotocol: one binary frame per message, a
 * little-endian uint64 count of offsets, the offsets, then channel, header, parent header,
 * metadata and content (JSON), then any buffers. JupyterLab offers it, and Bun's server
 * selects an offered protocol by itself, so a connection that offered it speaks it.
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
 * A message for a socket of the JSON framing, which has no place for binary buffers (base64
 * strings there would reach a client as buffers that are not): they are left out.
 */
export function jsonFraming(text: string): string {
  if (!text.includes('"buffers":["')) return text;
  const m = JSON.parse(text) as Record<string, unknown>;
  return JSON.stringify({ ...m, buffers: [] });
}
