/**
 * One HTTP/1.1 answer read from a connection's bytes (http1-fetch.ts): the status line and
 * headers, then the body as they frame it (RFC 9112 §6.3): none for 204/304/HEAD, chunked
 * transfer coding, Content-Length, else up to the connection's end. Interim 1xx answers are
 * skipped. The request said `Connection: close`, so the server ends the connection after
 * its answer; only an answer of known length is complete before that.
 *
 * Plain Uint8Array and strings only: the first Buffer, Headers or Response a process builds
 * costs it 0.3-0.9 ms each in the compiled binary (issue 34), and a short command builds
 * nothing else of them.
 */
import type { WholeAnswer } from "./api-client.ts";

export interface AnswerHead {
  readonly status: number;
  readonly statusText: string;
  readonly headers: ReadonlyMap<string, string>;
  /** Where the body starts in the bytes read. */
  readonly bodyStart: number;
  /** The body's length when the head says it (Content-Length, or 0 for none); else null. */
  readonly bodyBytes: number | null;
  readonly chunked: boolean;
}

/** A head beyond this is not an answer of the daemon's. */
const MAX_HEAD_BYTES = 64 * 1024;

const CR = 13;
const LF = 10;

/** Where `\r\n` (or `\r\n\r\n` when `twice`) starts at or after `from`; -1 when not there. */
function indexOfLineEnd(bytes: Uint8Array, from: number, twice = false): number {
  const need = twice ? 4 : 2;
  for (let i = bytes.indexOf(CR, from); i >= 0; i = bytes.indexOf(CR, i + 1)) {
    if (i + need > bytes.byteLength) return -1;
    if (bytes[i + 1] === LF && (!twice || (bytes[i + 2] === CR && bytes[i + 3] === LF))) return i;
  }
  return -1;
}

/**
 * Bytes as latin1 text (one char per byte): heads and chunk sizes are ASCII. Through
 * `apply`, which reads the array in native code: a spread walks it with the JS array
 * iterator, which a 200-byte head made hot enough to be JIT-compiled (2 ms of CPU).
 */
function latin1(bytes: Uint8Array): string {
  let text = "";
  for (let at = 0; at < bytes.byteLength; at += 8192) {
    const piece = bytes.subarray(at, at + 8192) as unknown as number[];
    text += String.fromCharCode.apply(null, piece);
  }
  return text;
}

/**
 * The final answer's head once all of it is here: null while it is not, a string saying
 * what is wrong with it.
 */
export function readHead(bytes: Uint8Array, isHead: boolean): AnswerHead | string | null {
  let start = 0;
  for (;;) {
    const end = indexOfLineEnd(bytes, start, true);
    if (end < 0) return bytes.byteLength - start > MAX_HEAD_BYTES ? "headers too long" : null;
    const head = parseHead(latin1(bytes.subarray(start, end)), end + 4, isHead);
    if (typeof head === "string" || head.status >= 200) return head;
    start = end + 4;
  }
}

/** A field name is a token (RFC 9110 §5.1); a value holds no control character but tab. */
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[^\0-\x08\x0a-\x1f\x7f]*$/;

/** The header lines as a map, or the first line that is not a header. */
function parseFields(lines: readonly string[]): Map<string, string> | string {
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (colon <= 0 || !FIELD_NAME.test(name) || !FIELD_VALUE.test(value)) {
      return `not a header line: ${JSON.stringify(line.slice(0, 80))}`;
    }
    const before = headers.get(name);
    headers.set(name, before === undefined ? value : `${before}, ${value}`);
  }
  return headers;
}

function parseHead(text: string, bodyStart: number, isHead: boolean): AnswerHead | string {
  const [statusLine = "", ...lines] = text.split("\r\n");
  const status = /^HTTP\/1\.[01] ([1-5][0-9]{2})(?: (.*))?$/.exec(statusLine);
  if (status === null) return `not a status line: ${JSON.stringify(statusLine.slice(0, 80))}`;
  const headers = parseFields(lines);
  if (typeof headers === "string") return headers;
  const code = Number(status[1]);
  // 101 switches to another protocol: nothing this client asked for.
  if (code === 101) return "the server switched protocols";
  const coding = headers.get("transfer-encoding") ?? null;
  const chunked = coding !== null && /(^|,)\s*chunked\s*$/i.test(coding);
  if (coding !== null && !chunked) return `transfer coding ${JSON.stringify(coding)}`;
  const length = headers.get("content-length") ?? null;
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
export function finalBody(bytes: Uint8Array, head: AnswerHead): Uint8Array | string | null {
  const rest = bytes.subarray(head.bodyStart);
  if (head.chunked) return dechunk(rest);
  if (head.bodyBytes === null) return rest;
  return rest.byteLength < head.bodyBytes ? null : rest.subarray(0, head.bodyBytes);
}

/** Pieces joined into one array (copied once). */
export function joinBytes(pieces: readonly Uint8Array[], total: number): Uint8Array {
  if (pieces.length === 1) return pieces[0] as Uint8Array;
  const whole = new Uint8Array(total);
  let at = 0;
  for (const piece of pieces) {
    whole.set(piece, at);
    at += piece.byteLength;
  }
  return whole;
}

/** A chunked body decoded; null when its last chunk never came. */
function dechunk(body: Uint8Array): Uint8Array | string | null {
  const parts: Uint8Array[] = [];
  let total = 0;
  let at = 0;
  for (;;) {
    const lineEnd = indexOfLineEnd(body, at);
    if (lineEnd < 0) return null;
    const sizeText = latin1(body.subarray(at, lineEnd)).split(";")[0]?.trim() ?? "";
    if (!/^[0-9a-fA-F]{1,12}$/.test(sizeText)) return `chunk size ${JSON.stringify(sizeText)}`;
    const size = Number.parseInt(sizeText, 16);
    // The last chunk; its trailers (ignored) end with an empty line.
    if (size === 0) {
      return indexOfLineEnd(body, lineEnd, true) >= 0 ? joinBytes(parts, total) : null;
    }
    const start = lineEnd + 2;
    if (body.byteLength < start + size + 2) return null;
    if (body[start + size] !== CR || body[start + size + 1] !== LF) {
      return "a chunk longer than its size";
    }
    parts.push(body.subarray(start, start + size));
    total += size;
    at = start + size + 2;
  }
}

/** The answer as the client reads it: no body for 204 and 304, as fetch gives them. */
export function toWholeAnswer(head: AnswerHead, body: Uint8Array): WholeAnswer {
  const empty = head.status === 204 || head.status === 304;
  return {
    status: head.status,
    statusText: head.statusText,
    ok: head.status >= 200 && head.status < 300,
    headers: head.headers,
    text: empty ? "" : new TextDecoder().decode(body),
  };
}
