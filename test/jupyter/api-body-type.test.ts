/**
 * What stock Jupyter clients send to /api/: JupyterLab's services under Node and in a
 * browser type their JSON bodies `text/plain;charset=UTF-8`, and a stock Jupyter Server
 * reads them as JSON. The daemon does too, when the request carries its token in a header
 * (`Authorization: token T` or `Bearer T`), which a cross-site form cannot forge; a request
 * that relies on the socket's file mode alone keeps the Content-Type check (415).
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const TOKEN = "admin-secret-token";
const TCP: Access = { kind: "Bearer", token: TOKEN };
const KERNEL = "/api/kernels/00000000-0000-0000-0000-000000000000/interrupt";

let h: Harness;
afterEach(() => h?.close());

function post(path: string, headers: Record<string, string>, access?: Access) {
  return h.request(
    path,
    {
      method: "POST",
      headers: { "Content-Type": "text/plain;charset=UTF-8", ...headers },
      body: "{}",
    },
    access,
  );
}

describe("/api/ bodies typed text/plain", () => {
  test.each([`token ${TOKEN}`, `Bearer ${TOKEN}`])(
    "with %p in the header are read as JSON",
    async (authorization) => {
      h = harness();
      const res = await post(KERNEL, { Authorization: authorization }, TCP);
      // Past the body: the kernel is looked up (and is not there).
      expect(res.status).toBe(404);
    },
  );

  test("with the token only in the URL keep the Content-Type check", async () => {
    h = harness();
    const res = await post(`${KERNEL}?token=${TOKEN}`, {}, TCP);
    expect(res.status).toBe(415);
  });

  test("over the socket with no header keep the Content-Type check", async () => {
    h = harness();
    const res = await post(KERNEL, {});
    expect(res.status).toBe(415);
    expect((await problemOf(res)).errors.map((e) => e.path)).toEqual(["Content-Type"]);
  });

  test("outside /api/ keep the Content-Type check, token or not", async () => {
    h = harness();
    const res = await post("/v1/workloads", { Authorization: `Bearer ${TOKEN}` }, TCP);
    expect(res.status).toBe(415);
  });
});
