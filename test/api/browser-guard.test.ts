/**
 * The browser guard (servers/http/browser-guard.ts) through app.request(), on the socket's
 * access and TCP's: a rebinding-shaped Host, a cross-site state change or websocket, an
 * untyped or text body. Each refusal writes nothing; what a browser's own pages, the CLI and
 * stock Jupyter clients send still passes. The real browser's view is test/ui/browser-attacks.
 */
import { afterEach, describe, expect, test } from "bun:test";
import {
  type GuardedRequest,
  judgeRequest,
  LOOPBACK_ONLY,
} from "../../src/servers/http/browser-guard.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const TOKEN = "t".repeat(43);
const TCP: Access = { kind: "Bearer", token: TOKEN };
const BATCH = { kind: "BATCH", profile: "default", command: ["true"] };

let h: Harness | undefined;
afterEach(() => {
  h?.close();
  h = undefined;
});

function submit(
  harnessed: Harness,
  headers: Record<string, string>,
  access: Access = { kind: "LocalSocket" },
  url = "http://localhost/v1/workloads",
  body: string | Blob = JSON.stringify(BATCH),
) {
  return harnessed.app.request(
    url,
    {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, ...headers },
      body,
    },
    { access },
  );
}

async function refused(response: Response | Promise<Response>, status: number, reason: string) {
  const res = await response;
  expect(res.status).toBe(status);
  const problem = await problemOf(res);
  expect(problem.reason).toBe(reason);
  return problem;
}

describe("Host: loopback or configured, on every route and method", () => {
  for (const access of [{ kind: "LocalSocket" } as const, TCP]) {
    test(`a rebinding-shaped Host is refused before anything is read or written (${access.kind})`, async () => {
      h = harness();
      for (const host of [
        "attacker.example",
        "attacker.example:8080",
        "127.0.0.1.nip.io",
        "localhost.attacker.example",
        "0x7f.1",
        "",
        "[::2]:80",
      ]) {
        await refused(
          submit(h, { host, "content-type": "application/json" }, access),
          403,
          "HOST_REFUSED",
        );
        const read = await h.app.request(
          "http://localhost/v1/workloads",
          { headers: { host, authorization: `Bearer ${TOKEN}` } },
          { access },
        );
        expect(read.status).toBe(403);
        const token = await h.app.request(
          "http://localhost/v1/principals/a/tokens",
          {
            method: "POST",
            headers: { host, "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
            body: "{}",
          },
          { access },
        );
        expect(token.status).toBe(403);
      }
      expect(h.rows().workloads).toBe(0);
    });
  }

  test("loopback names pass: localhost, 127.0.0.0/8, [::1], with or without a port", async () => {
    h = harness();
    for (const host of [
      "localhost",
      "LOCALHOST:8080",
      "localhost.",
      "127.0.0.1:1",
      "127.200.3.4",
      "[::1]",
      "[::1]:8080",
    ]) {
      const res = await h.app.request(
        "http://localhost/v1/workloads",
        { headers: { host } },
        { access: { kind: "LocalSocket" } },
      );
      expect({ host, status: res.status }).toEqual({ host, status: 200 });
    }
  });

  test("a name the admin allowed passes; others still do not", async () => {
    h = harness({ browserGuard: { allowedHosts: ["login1.example.org"], allowedOrigins: [] } });
    const ok = await submit(
      h,
      { host: "Login1.Example.org:8443", "content-type": "application/json" },
      TCP,
    );
    expect(ok.status).toBe(201);
    await refused(
      submit(h, { host: "login2.example.org", "content-type": "application/json" }, TCP),
      403,
      "HOST_REFUSED",
    );
  });
});

describe("Origin and Sec-Fetch-Site: no state change from another site", () => {
  test.each([
    [{ origin: "http://attacker.example" }],
    [{ origin: "null" }],
    [{ origin: "http://localhost:9999" }],
    [{ origin: "not a url" }],
    [{ origin: "http://attacker.example", "sec-fetch-site": "same-origin" }],
    [{ "sec-fetch-site": "cross-site" }],
    [{ "sec-fetch-site": "same-site" }],
  ])("%p on a POST is refused, nothing created", async (headers) => {
    h = harness();
    await refused(
      submit(h, { host: "localhost:8080", "content-type": "application/json", ...headers }),
      403,
      "CROSS_SITE_REFUSED",
    );
    expect(h.rows().workloads).toBe(0);
    expect(h.admitted).toEqual([]);
  });

  test.each([
    [{}],
    [{ origin: "http://localhost:8080" }],
    [{ origin: "https://localhost:8080" }],
    [{ "sec-fetch-site": "same-origin" }],
    [{ "sec-fetch-site": "none" }],
  ])("%p on a POST is this server's own (or no browser): created", async (headers) => {
    h = harness();
    const res = await submit(h, {
      host: "localhost:8080",
      "content-type": "application/json",
      ...headers,
    });
    expect(res.status).toBe(201);
  });

  test("an origin the admin allowed may change state", async () => {
    h = harness({
      browserGuard: { allowedHosts: [], allowedOrigins: ["https://hub.example.org"] },
    });
    const res = await submit(
      h,
      { origin: "https://hub.example.org", "content-type": "application/json" },
      TCP,
    );
    expect(res.status).toBe(201);
    await refused(
      submit(
        h,
        { origin: "https://hub.example.org.attacker.example", "content-type": "application/json" },
        TCP,
      ),
      403,
      "CROSS_SITE_REFUSED",
    );
  });

  test("a cross-site websocket upgrade to a kernel's channels is refused; a cross-site read is left to the browser's same-origin rule", async () => {
    h = harness();
    const ws = h.app.request(
      "http://localhost/api/kernels/k1/channels",
      {
        headers: {
          upgrade: "websocket",
          connection: "Upgrade",
          origin: "http://attacker.example",
          "sec-websocket-version": "13",
          "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
      },
      { access: { kind: "LocalSocket" } },
    );
    await refused(ws, 403, "CROSS_SITE_REFUSED");
    const read = await h.app.request(
      "http://localhost/v1/workloads",
      { headers: { origin: "http://attacker.example", "sec-fetch-site": "cross-site" } },
      { access: { kind: "LocalSocket" } },
    );
    expect(read.status).toBe(200);
    expect(read.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("/ui's cancel form from another site is refused by the guard before its CSRF check", async () => {
    h = harness();
    const res = await h.app.request(
      "http://localhost/ui/workloads/w-1/cancel",
      {
        method: "POST",
        headers: {
          origin: "http://attacker.example",
          "content-type": "application/x-www-form-urlencoded",
        },
        body: "csrf=x",
      },
      { access: { kind: "LocalSocket" } },
    );
    await refused(Promise.resolve(res), 403, "CROSS_SITE_REFUSED");
  });

  test("a route mounted after the guard (as /mcp will be) is guarded too", async () => {
    h = harness();
    let ran = 0;
    h.app.post("/later", (c) => {
      ran += 1;
      return c.text("ran");
    });
    await refused(
      h.app.request(
        "http://localhost/later",
        { method: "POST", headers: { origin: "http://attacker.example" } },
        { access: { kind: "LocalSocket" } },
      ),
      403,
      "CROSS_SITE_REFUSED",
    );
    await refused(
      h.app.request(
        "http://localhost/later",
        { method: "POST", headers: { host: "attacker.example" } },
        { access: { kind: "LocalSocket" } },
      ),
      403,
      "HOST_REFUSED",
    );
    expect(ran).toBe(0);
  });
});

describe("a state-changing body must say application/json", () => {
  test.each([
    [undefined, new Blob([JSON.stringify(BATCH)])],
    ["text/plain", JSON.stringify(BATCH)],
    ["text/plain;charset=UTF-8", JSON.stringify(BATCH)],
    ["application/x-www-form-urlencoded", JSON.stringify(BATCH)],
    ["multipart/form-data; boundary=x", JSON.stringify(BATCH)],
    ["application/jsonx", JSON.stringify(BATCH)],
  ])("%p is 415, nothing created (the no-cors POST with a Blob)", async (type, body) => {
    h = harness();
    const headers: Record<string, string> = type === undefined ? {} : { "content-type": type };
    const problem = await refused(
      submit(h, headers, { kind: "LocalSocket" }, undefined, body),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    );
    expect(problem.errors.map((e) => e.path)).toEqual(["Content-Type"]);
    expect(h.rows().workloads).toBe(0);
  });

  test("a body-less POST needs no type (cancel)", async () => {
    h = harness();
    const created = (await (await submit(h, { "content-type": "application/json" })).json()) as {
      id: string;
    };
    const res = await h.app.request(
      `http://localhost/v1/workloads/${created.id}/cancel`,
      { method: "POST" },
      { access: { kind: "LocalSocket" } },
    );
    expect(res.status).toBe(202);
  });
});

describe("the rule alone (judgeRequest)", () => {
  const base: GuardedRequest = {
    method: "POST",
    path: "/api/kernels",
    host: "localhost:8888",
    origin: undefined,
    secFetchSite: undefined,
    upgrade: undefined,
    contentType: "text/plain;charset=UTF-8",
    authorization: undefined,
    hasBody: true,
  };
  test("stock Jupyter clients' text/plain JSON passes under /api only with a token in a header", () => {
    expect(judgeRequest({ ...base, authorization: "token abc" }, LOOPBACK_ONLY).kind).toBe("Pass");
    expect(judgeRequest({ ...base, authorization: "Bearer abc" }, LOOPBACK_ONLY).kind).toBe("Pass");
    expect(judgeRequest(base, LOOPBACK_ONLY)).toMatchObject({ status: 415 });
    expect(judgeRequest({ ...base, authorization: "Basic abc" }, LOOPBACK_ONLY)).toMatchObject({
      status: 415,
    });
    expect(
      judgeRequest({ ...base, path: "/v1/workloads", authorization: "token abc" }, LOOPBACK_ONLY),
    ).toMatchObject({ status: 415 });
    expect(
      judgeRequest({ ...base, path: "/apix", authorization: "token abc" }, LOOPBACK_ONLY),
    ).toMatchObject({ status: 415 });
    // The token exempts the type, never the origin.
    expect(
      judgeRequest(
        { ...base, authorization: "token abc", origin: "http://a.example" },
        LOOPBACK_ONLY,
      ),
    ).toMatchObject({ status: 403 });
  });

  test("uploads (PUT raw bytes) and /ui forms are not JSON routes; a DELETE with a text body is", () => {
    const upload = {
      ...base,
      method: "PUT",
      path: "/v1/workloads/w-1/files/a.txt",
      contentType: "application/octet-stream",
    };
    expect(judgeRequest(upload, LOOPBACK_ONLY).kind).toBe("Pass");
    expect(judgeRequest({ ...upload, method: "POST" }, LOOPBACK_ONLY)).toMatchObject({
      status: 415,
    });
    expect(
      judgeRequest(
        { ...base, path: "/ui/login", contentType: "application/x-www-form-urlencoded" },
        LOOPBACK_ONLY,
      ).kind,
    ).toBe("Pass");
    expect(
      judgeRequest({ ...base, method: "DELETE", path: "/v1/principals/a" }, LOOPBACK_ONLY),
    ).toMatchObject({ status: 415 });
    expect(
      judgeRequest(
        { ...base, method: "DELETE", path: "/v1/principals/a", hasBody: false },
        LOOPBACK_ONLY,
      ).kind,
    ).toBe("Pass");
  });

  test("a GET is judged on its Host only; an upgrade on its Origin too", () => {
    const get = { ...base, method: "GET", origin: "http://a.example", secFetchSite: "cross-site" };
    expect(judgeRequest(get, LOOPBACK_ONLY).kind).toBe("Pass");
    expect(judgeRequest({ ...get, upgrade: "WebSocket" }, LOOPBACK_ONLY)).toMatchObject({
      status: 403,
      slug: "cross-site-refused",
    });
    expect(judgeRequest({ ...get, host: "a.example" }, LOOPBACK_ONLY)).toMatchObject({
      status: 403,
      slug: "host-refused",
    });
  });
});
