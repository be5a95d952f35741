/**
 * The client's own HTTP/1.1 (http1-fetch.ts, issue 34) against real servers: Bun.serve, as
 * the daemon answers, side by side with fetch on the same requests; and a raw socket server
 * for the framings and faults a server may send (chunked in pieces, 1xx first, no length,
 * cut short, garbage). What fetch would refuse it refuses; what fetch would read it reads
 * the same.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createClient, type WholeFetch } from "../../src/apps/cli/api-client.ts";
import { type Http1Init, http1Fetch } from "../../src/apps/cli/http1-fetch.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-http1-");

/** What the server saw of a request: method, target, headers it was sent, body. */
interface Seen {
  readonly method: string;
  readonly target: string;
  readonly accept: string | null;
  readonly auth: string | null;
  readonly body: string;
}

// fetch sends "Accept: any type" unless told; the client always names JSON.
const JSON_ONLY = { Accept: "application/json" };

/** The client's whole-answer fetch, as the runtime hands it over. */
const whole: WholeFetch = (url, init) => http1Fetch(url, init);

const BIG = "x".repeat(12 * 1024 * 1024);

function serve(unix: string) {
  return Bun.serve({
    unix,
    async fetch(request) {
      const url = new URL(request.url);
      if (url.pathname === "/big") return new Response(BIG);
      if (url.pathname === "/none") return new Response(null, { status: 204 });
      if (url.pathname === "/problem") {
        return Response.json(
          { type: "about:blank", title: "Not found", status: 404, detail: "no such thing" },
          { status: 404, statusText: "Not Found", headers: { "X-Why": "test" } },
        );
      }
      const seen: Seen = {
        method: request.method,
        target: `${url.pathname}${url.search}`,
        accept: request.headers.get("accept"),
        auth: request.headers.get("authorization"),
        body: await request.text(),
      };
      return Response.json(seen, { status: request.method === "POST" ? 201 : 200 });
    },
  });
}

describe("against Bun.serve, as fetch", () => {
  let server: ReturnType<typeof serve>;
  let socket: string;
  beforeAll(() => {
    socket = join(tempDir(), "api.sock");
    server = serve(socket);
  });
  afterAll(() => server.stop(true));

  const both = async (path: string, init: Http1Init = {}) => {
    const ours = await http1Fetch(`http://localhost${path}`, { ...init, unix: socket });
    const theirs = await fetch(`http://localhost${path}`, { ...init, unix: socket });
    return [ours, theirs] as const;
  };

  test("GET and POST: status, headers and body as fetch reads them", async () => {
    for (const init of [
      { headers: { Accept: "application/json", Authorization: "Bearer t0k" } },
      { method: "POST", body: JSON.stringify({ name: "ünïcode ✓" }), headers: JSON_ONLY },
      { method: "POST", headers: JSON_ONLY },
      { method: "DELETE", headers: JSON_ONLY },
    ] satisfies Http1Init[]) {
      const [ours, theirs] = await both("/v1/workloads?limit=5", init);
      expect(ours.status).toBe(theirs.status);
      expect(ours.headers.get("content-type")).toBe(theirs.headers.get("content-type") ?? "");
      expect(JSON.parse(ours.text)).toEqual(await theirs.json());
    }
  });

  test("the path is normalized and encoded as fetch does", async () => {
    for (const path of ["/a/../v1/x", "/v1/a b?q=x y&z=ü", "/v1/%2e%2e/y", "/v1/w-1#frag"]) {
      const [ours, theirs] = await both(path);
      expect((JSON.parse(ours.text) as Seen).target).toBe(((await theirs.json()) as Seen).target);
    }
  });

  test("a problem answer keeps its status text and headers; 204 has no body", async () => {
    const [ours, theirs] = await both("/problem");
    expect([ours.status, ours.statusText, ours.headers.get("x-why")]).toEqual([
      404,
      theirs.statusText,
      "test",
    ]);
    expect(ours.text).toBe(await theirs.text());
    expect(ours.ok).toBe(theirs.ok);
    const none = await http1Fetch("http://localhost/none", { unix: socket });
    expect([none.status, none.text, none.ok]).toEqual([204, "", true]);
  });

  test("a large answer arrives whole", async () => {
    const big = await http1Fetch("http://localhost/big", { unix: socket });
    const text = big.text;
    expect(text.length).toBe(BIG.length);
    expect(text === BIG).toBe(true);
  });

  test("a request body larger than the socket takes at once goes out whole, ASCII or not", async () => {
    for (const body of ["a".repeat(3_000_000), "ü✓".repeat(1_000_000)]) {
      const answer = await http1Fetch("http://localhost/echo", {
        method: "POST",
        body,
        headers: JSON_ONLY,
        unix: socket,
      });
      const seen = JSON.parse(answer.text) as Seen;
      expect(seen.body.length).toBe(body.length);
      expect(seen.body === body).toBe(true);
    }
  });

  test("over TCP too", async () => {
    const tcp = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () => Response.json({ ok: 1 }),
    });
    try {
      const answer = await http1Fetch(`http://127.0.0.1:${tcp.port}/x`);
      expect(JSON.parse(answer.text)).toEqual({ ok: 1 });
    } finally {
      tcp.stop(true);
    }
  });

  test("a header that would start another header is refused, nothing sent", () => {
    expect(() =>
      http1Fetch("http://localhost/x", {
        unix: socket,
        headers: { Authorization: "Bearer t\r\nX-Admin: yes" },
      }),
    ).toThrow(TypeError);
  });
});

/** A server that answers every connection with `answer` written in the given pieces. */
function rawServer(unix: string, pieces: readonly string[], close = true) {
  return Bun.listen({
    unix,
    socket: {
      async data(socket) {
        for (const piece of pieces) {
          socket.write(piece);
          await Bun.sleep(2);
        }
        if (close) socket.end();
      },
    },
  });
}

async function rawAnswer(pieces: readonly string[], init: Http1Init = {}) {
  const unix = join(tempDir(), `raw-${crypto.randomUUID().slice(0, 8)}.sock`);
  const listener = rawServer(unix, pieces);
  try {
    const answer = await http1Fetch("http://localhost/x", { ...init, unix });
    return { status: answer.status, body: answer.text };
  } catch (error) {
    return { code: (error as { code?: string }).code, message: (error as Error).message };
  } finally {
    listener.stop(true);
  }
}

describe("framings and faults, from a raw server", () => {
  test("chunked in pieces, with an extension and trailers", async () => {
    const answer = await rawAnswer([
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhel",
      "lo\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n",
    ]);
    expect(answer).toEqual({ status: 200, body: "hello world" });
  });

  test("no length: the body is all until the connection ends", async () => {
    expect(await rawAnswer(["HTTP/1.1 200 OK\r\n\r\nsome", " more"])).toEqual({
      status: 200,
      body: "some more",
    });
  });

  test("an interim 100 Continue before the answer is skipped", async () => {
    const answer = await rawAnswer([
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ]);
    expect(answer).toEqual({ status: 200, body: "ok" });
  });

  test("a head split byte by byte is read", async () => {
    const text = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    expect(await rawAnswer([...text])).toEqual({ status: 200, body: "abc" });
  });

  test("an answer of known length is complete before the server closes", async () => {
    const unix = join(tempDir(), "open.sock");
    const listener = rawServer(unix, ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], false);
    try {
      const answer = await http1Fetch("http://localhost/x", { unix });
      expect(answer.text).toBe("ok");
    } finally {
      listener.stop(true);
    }
  });

  test("cut short is ECONNRESET, never a shorter body", async () => {
    for (const pieces of [
      ["HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"],
      ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"],
      ["HTTP/1.1 200 OK\r\nContent-Le"],
      [],
    ]) {
      expect(await rawAnswer(pieces)).toMatchObject({ code: "ECONNRESET" });
    }
  });

  test("garbage is EPROTO, naming what is wrong", async () => {
    for (const [pieces, why] of [
      [["SSH-2.0-OpenSSH\r\n\r\n"], "status line"],
      [["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"], "header line"],
      [["HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n"], "header line"],
      [["HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n"], "header line"],
      [["HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"], "Content-Length"],
      [["HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"], "transfer coding"],
      [["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], "chunk size"],
      [["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n"], "chunk"],
      [["HTTP/1.1 101 Switching Protocols\r\n\r\n"], "switched"],
      [[`HTTP/1.1 200 OK\r\nX: ${"a".repeat(70_000)}`], "too long"],
    ] as const) {
      const answer = await rawAnswer(pieces);
      expect(answer).toMatchObject({ code: "EPROTO" });
      expect((answer as { message: string }).message).toContain(why);
    }
  });

  test("a repeated header's values are joined as Headers joins them; bad UTF-8 is replaced", async () => {
    const unix = join(tempDir(), "hdr.sock");
    const listener = Bun.listen({
      unix,
      socket: {
        data(socket) {
          socket.write("HTTP/1.1 200 OK\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 3\r\n\r\n");
          socket.write(new Uint8Array([0x6f, 0xff, 0x6b]));
          socket.end();
        },
      },
    });
    try {
      const answer = await http1Fetch("http://localhost/x", { unix });
      const theirs = await fetch("http://localhost/x", { unix });
      expect(answer.headers.get("x-a")).toBe(theirs.headers.get("x-a") ?? "");
      expect(answer.text).toBe(await theirs.text());
    } finally {
      listener.stop(true);
    }
  });

  test("HEAD's answer has no body whatever its length says", async () => {
    const answer = await rawAnswer(["HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"], {
      method: "HEAD",
    });
    expect(answer).toEqual({ status: 200, body: "" });
  });
});

describe("connecting", () => {
  test("no socket, or nothing listening: never connected (another address may be tried)", async () => {
    const missing = createClient({ kind: "unix", path: join(tempDir(), "absent.sock") }, null, {
      fetch: () => Promise.reject(new Error("fetch is not the whole-answer path")),
      fetchWhole: whole,
    });
    expect(await missing.request("GET", "/v1/x")).toMatchObject({
      kind: "Unreachable",
      neverConnected: true,
    });
    const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = listener.port;
    listener.stop(true);
    const refused = createClient({ kind: "http", baseUrl: `http://127.0.0.1:${port}` }, null, {
      fetch: () => Promise.reject(new Error("fetch is not the whole-answer path")),
      fetchWhole: whole,
    });
    expect(await refused.request("GET", "/v1/x")).toMatchObject({
      kind: "Unreachable",
      neverConnected: true,
    });
  });

  test("an answer cut short after the request went out is not 'never connected'", async () => {
    const unix = join(tempDir(), "cut.sock");
    const listener = rawServer(unix, ["HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n{"]);
    try {
      const client = createClient({ kind: "unix", path: unix }, null, {
        fetch: () => Promise.reject(new Error("unused")),
        fetchWhole: whole,
      });
      const result = await client.request("POST", "/v1/workloads", { body: { a: 1 } });
      expect(result.kind).toBe("Unreachable");
      expect((result as { neverConnected?: boolean }).neverConnected).not.toBe(true);
    } finally {
      listener.stop(true);
    }
  });

  test("https and uploads go through fetch, not this client", async () => {
    const used: string[] = [];
    const runtime = {
      fetch: async () => {
        used.push("fetch");
        return Response.json({});
      },
      fetchWhole: async () => {
        used.push("whole");
        return { status: 200, statusText: "OK", ok: true, headers: new Map(), text: "{}" };
      },
    };
    await createClient({ kind: "http", baseUrl: "https://example.invalid" }, "t", runtime).request(
      "GET",
      "/v1/x",
    );
    await createClient({ kind: "unix", path: "/s" }, "t", runtime).send(
      "PUT",
      "/v1/f",
      new Blob(["x"]),
    );
    await createClient({ kind: "unix", path: "/s" }, "t", runtime).stream("/v1/logs");
    await createClient({ kind: "unix", path: "/s" }, "t", runtime).request("GET", "/v1/x");
    expect(used).toEqual(["fetch", "fetch", "fetch", "whole"]);
  });
});
