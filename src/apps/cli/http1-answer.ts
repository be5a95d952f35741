/**
 * One HTTP/1.1 answer read from a connection's bytes (http1-fetch.ts): the status line and
 * headers, then the body as they frame it (RFC 9112 §6.3): none for 204/304/HEAD, chunked
 * transfer coding, Content-Length, else up to the connection's end. Interim 1xx answers are
 * skipped. The request said `Connection: close`, so the server ends the connection after
 * its answer; only an answer of known length is complete before that.
 */

export interface AnswerHead {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  /** Where the body starts in the bytes read. */
  readonly bodyStart: number;
  /** The body's length when the head says it (Content-Length, or 0 for none); else null. */
  readonly bodyBytes: number | null;
  readonly chunked: boolean;
}

/** A head beyond this is not an answer of the daemon's. */
const MAX_HEAD_BYTES = 64 * 1024;

/**
 * The final answer's head once all of it is here: null while it is not, a string saying
 * what is wrong with it.
 */
export function readHead(bytes: Buffer, isHead: boolean): AnswerHead | string | null {
  let start = 0;
  for (;;) {
    const end = bytes.indexOf("\r\n\r\n", start);
    if (end < 0) return bytes.byteLength - start > MAX_HEAD_BYTES ? "headers too long" : null;
    const head = parseHead(bytes.subarray(start, end).toString("latin1"), end + 4, isHead);
    if (typeof head === "string" || head.status >= 200) return head;
    start = end + 4;
  }
}

function parseHead(text: string, bodyStart: number, isHead: boolean): AnswerHead | string {
  const [statusLine = "", ...lines] = text.split("\r\n");
  const status = /^HTTP\/1\.[01] ([1-5][0-9]{2})(?: (.*))?$/.exec(statusLine);
  if (status === null) return `not a status line: ${JSON.stringify(statusLine.slice(0, 80))}`;
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(":");
    try {
      if (colon <= 0) throw new Error("no header name");
      headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    } catch {
      return `not a header line: ${JSON.stringify(line.slice(0, 80))}`;
    }
  }
  const code = Number(status[1]);
  // 101 switches to another protocol: nothing this client asked for.
  if (code === 101) return "the server switched protocols";
  const coding = headers.get("transfer-encoding");
  const chunked = coding !== null && /(^|,)\s*chunked\s*$/i.test(coding);
  if (coding !== null && !chunked) return `transfer coding ${JSON.stringify(coding)}`;
  const length = headers.get("content-length");
  if (!chunked && length !== null && !/^[0-9]{1,15}$/.test(length)) {
    return `Content-Length ${JSON.stringify(length)}`;
  }
  const empty = isHead || code === 204 || code === 304 || code < 200;
  return {
    status: code,
    statusText: status[2] ?? "",
    headers,
    bodyStart,
    bodyBytes: empty ? 0 : chunked || length === null ? null : Number(length),
    chunked: !empty && chunked,
  };
}

/**
 * The body once the answer is known complete or the connection has ended: null when it was
 * cut short (fewer bytes than Content-Length, or no last chunk), a string when the chunked
 * coding is broken.
 */
export function finalBody(bytes: Buffer, head: AnswerHead): Buffer | string | null {
  const rest = bytes.subarray(head.bodyStart);
  if (head.chunked) return dechunk(rest);
  if (head.bodyBytes === null) return rest;
  return rest.byteLength < head.bodyBytes ? null : rest.subarray(0, head.bodyBytes);
}

/** A chunked body decoded; null when its last chunk never came. */
function dechunk(body: Buffer): Buffer | string | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf("\r\n", at);
    if (lineEnd < 0) return null;
    const sizeText = body.subarray(at, lineEnd).toString("latin1").split(";")[0]?.trim() ?? "";
    if (!/^[0-9a-fA-F]{1,12}$/.test(sizeText)) return `chunk size ${JSON.stringify(sizeText)}`;
    const size = Number.parseInt(sizeText, 16);
    // The last chunk; its trailers (ignored) end with an empty line.
    if (size === 0) return body.indexOf("\r\n\r\n", lineEnd) >= 0 ? Buffer.concat(parts) : null;
    const start = lineEnd + 2;
    if (body.byteLength < start + size + 2) return null;
    if (body.toString("latin1", start + size, start + size + 2) !== "\r\n") {
      return "a chunk longer than its size";
    }
    parts.push(body.subarray(start, start + size));
    at = start + size + 2;
  }
}

/** The answer as fetch gives it. */
export function toResponse(head: AnswerHead, body: Buffer): Response {
  const empty = head.status === 204 || head.status === 304;
  return new Response(empty ? null : body, {
    status: head.status,
    statusText: head.statusText,
    headers: head.headers,
  });
}
