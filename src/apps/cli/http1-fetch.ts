/**
 * The client's fetch for answers read whole (issue 34: a short command starts like the
 * runtime): HTTP/1.1 spoken here over `Bun.connect`, on the main thread's event loop. Bun's
 * fetch first starts an HTTP client thread: in a compiled one-liner making one request over
 * the daemon's socket, 2 ms of wall time and 3 ms of CPU more than this, where all of
 * `openai4s list` past the runtime's own start is about 8 ms (bench/startup.bench.ts).
 * One request per connection (`Connection: close`); the answer is read by http1-answer.ts.
 * The URL goes through `new URL` as fetch's does, so a path is normalized and
 * percent-encoded the same way.
 *
 * Errors carry fetch's codes: ENOENT or ECONNREFUSED from a connect that reached nothing
 * (the request was never delivered: the fallback client may try another address),
 * ECONNRESET for an answer cut short (it may have been delivered: never retried elsewhere).
 */
import type { SocketHandler } from "bun";
import type { WholeAnswer } from "./api-client.ts";
import { type AnswerHead, finalBody, joinBytes, readHead, toWholeAnswer } from "./http1-answer.ts";

export interface Http1Init {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly unix?: string;
}

/** A CR, LF or NUL in a header would let a value start a header of its own (fetch refuses). */
const UNSAFE_HEADER = /[\r\n\0]/;

const CUT_SHORT = "the connection closed before the answer was complete";

const ASCII = /^[\0-\x7f]*$/;

/**
 * The request: request line, headers, then the body. A string while it is ASCII (a socket
 * write's count is then in characters), else its UTF-8 bytes.
 */
function request(url: URL, init: Http1Init): string | Uint8Array {
  const method = init.method ?? "GET";
  const lines = [`${method} ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`];
  for (const [name, value] of Object.entries(init.headers ?? {})) {
    if (UNSAFE_HEADER.test(name) || UNSAFE_HEADER.test(value) || name.includes(":")) {
      throw new TypeError(`invalid header ${JSON.stringify(name)}`);
    }
    lines.push(`${name}: ${value}`);
  }
  const body = init.body ?? "";
  // Each part looked at once, and a body that is not ASCII encoded once.
  const bodyBytes = ASCII.test(body) ? null : new TextEncoder().encode(body);
  if (init.body !== undefined || method === "POST" || method === "PUT") {
    lines.push(`Content-Length: ${bodyBytes === null ? body.length : bodyBytes.byteLength}`);
  }
  lines.push("Connection: close", "", "");
  const head = lines.join("\r\n");
  if (bodyBytes === null && ASCII.test(head)) return head + body;
  const headBytes = new TextEncoder().encode(head);
  const rest = bodyBytes ?? new TextEncoder().encode(body);
  return joinBytes([headBytes, rest], headBytes.byteLength + rest.byteLength);
}

function coded(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

type Endpoint = { readonly unix: string } | { readonly hostname: string; readonly port: number };

/** Where to connect: the unix socket, or the URL's host and port (http: only). */
function endpoint(url: URL, init: Http1Init): Endpoint {
  if (init.unix !== undefined) return { unix: init.unix };
  if (url.protocol !== "http:") throw new TypeError(`http1Fetch: ${url.protocol} is not served`);
  // An IPv6 literal comes bracketed from URL; the socket wants the bare address.
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  return { hostname, port: url.port === "" ? 80 : Number(url.port) };
}

export function http1Fetch(input: string, init: Http1Init = {}): Promise<WholeAnswer> {
  const url = new URL(input);
  let unsent = request(url, init);
  const where = endpoint(url, init);
  const isHead = init.method === "HEAD";
  const { promise, resolve, reject } = Promise.withResolvers<WholeAnswer>();
  let settled = false;
  const fail = (error: unknown): true => {
    if (!settled) reject(error);
    settled = true;
    return true;
  };
  // Pieces are joined only when looked at whole: a large answer is copied once, not per piece.
  const pieces: Uint8Array[] = [];
  let total = 0;
  const joined = (): Uint8Array => {
    if (pieces.length !== 1) pieces.splice(0, pieces.length, joinBytes(pieces, total));
    return pieces[0] as Uint8Array;
  };
  let head: AnswerHead | null = null;
  /** The answer once what came is all of it; null while more is to come. Throws if bad. */
  const read = (ended: boolean): WholeAnswer | null => {
    if (head === null) {
      const found = readHead(joined(), isHead);
      if (typeof found === "string") throw coded(`malformed answer: ${found}`, "EPROTO");
      if (found === null) {
        if (ended) throw coded(CUT_SHORT, "ECONNRESET");
        return null;
      }
      head = found;
    }
    const complete = head.bodyBytes !== null && total - head.bodyStart >= head.bodyBytes;
    if (!ended && !complete) return null;
    const body = finalBody(joined(), head);
    if (typeof body === "string") throw coded(`malformed answer: ${body}`, "EPROTO");
    if (body === null) throw coded(CUT_SHORT, "ECONNRESET");
    return toWholeAnswer(head, body);
  };
  /**
   * Reads what came; true once the answer is settled (whole, malformed or cut short). Any
   * throw rejects the request: a promise left pending would hang the command for good (a
   * top-level await on it never returns once the socket is gone).
   */
  const look = (ended: boolean): boolean => {
    if (settled) return true;
    try {
      const answer = read(ended);
      if (answer === null) return false;
      settled = true;
      resolve(answer);
      return true;
    } catch (error) {
      return fail(error);
    }
  };
  // A write takes what the socket's buffer holds; the rest goes out on each drain.
  const flush = (socket: { write(data: string | Uint8Array): number }) => {
    if (unsent.length > 0) unsent = unsent.slice(Math.max(socket.write(unsent), 0));
  };
  // Plain Uint8Array pieces: a Buffer's first use costs a short command about 0.9 ms.
  const socket: SocketHandler = {
    binaryType: "uint8array",
    open: flush,
    drain: flush,
    data(connection, data) {
      pieces.push(data);
      total += data.byteLength;
      if (look(false)) connection.end();
    },
    close: () => {
      look(true);
    },
    error: (_connection, error) => {
      fail(error);
    },
    connectError: (_connection, error) => {
      fail(error);
    },
  };
  const connecting =
    "unix" in where ? Bun.connect({ unix: where.unix, socket }) : Bun.connect({ ...where, socket });
  connecting.catch(fail);
  return promise;
}
