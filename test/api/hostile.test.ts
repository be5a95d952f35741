/**
 * Hostile input against the API, in process (`app.request()`): every refusal is
 * problem+json naming what is wrong, and leaves no row and no file behind.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { type Harness, harness, problemOf, snapshotFiles } from "../support/api-harness.ts";

let h: Harness;
afterEach(() => h?.close());

const BATCH = { kind: "BATCH", profile: "default", command: ["true"] } as const;

async function refusedWithoutWrites(
  response: Promise<Response>,
  status: number,
): Promise<Awaited<ReturnType<typeof problemOf>>> {
  const before = { rows: h.rows(), files: snapshotFiles(h.dir) };
  const res = await response;
  expect(res.status).toBe(status);
  const problem = await problemOf(res);
  expect(problem.status).toBe(status);
  expect(h.rows()).toEqual(before.rows);
  expect(snapshotFiles(h.dir)).toEqual(before.files);
  return problem;
}

describe("validation names the field and says what is wrong with it", () => {
  test("a missing required field is reported as missing, not as unknown", async () => {
    h = harness();
    const problem = await refusedWithoutWrites(
      h.post("/v1/workloads", { kind: "BATCH", command: ["true"] }),
      400,
    );
    expect(problem.errors).toHaveLength(1);
    expect(problem.errors[0]?.path).toBe("profile");
    expect(problem.errors[0]?.message).not.toContain("unknown");
    expect(problem.errors[0]?.message).toContain("required");
  });

  test("an unknown field is still named as unknown", async () => {
    h = harness();
    const problem = await refusedWithoutWrites(h.post("/v1/workloads", { ...BATCH, x: 1 }), 400);
    expect(problem.errors).toEqual([{ path: "x", message: 'unknown field "x"' }]);
  });

  test.each(["__proto__", "constructor", "prototype"])(
    "env key %p is refused, never silently dropped",
    async (key) => {
      h = harness();
      // Raw JSON: an object literal with __proto__ would set the prototype, not a key.
      const body = `{"kind":"BATCH","profile":"default","command":["true"],"env":{"${key}":"x"}}`;
      const problem = await refusedWithoutWrites(h.post("/v1/workloads", body), 400);
      expect(problem.errors.map((e) => e.path)).toEqual([`env.${key}`]);
    },
  );
});

describe("a job array's array and maxConcurrent", () => {
  // The largest a request may ask for at all (Slurm's MaxArraySize ceiling); a profile's own
  // limit is checked at admission.
  const max = 4_000_001;
  test.each([
    ["array", 0],
    ["array", -1],
    ["array", 1.5],
    ["array", "3"],
    ["array", max + 1],
    ["array", null],
    ["array", 1e300],
    ["maxConcurrent", 0],
    ["maxConcurrent", 2.5],
    ["maxConcurrent", "1"],
    ["maxConcurrent", max + 1],
    ["maxConcurrent", true],
  ] as const)("%s = %p is a 400 naming the field, writing nothing", async (field, value) => {
    h = harness();
    const body = { ...BATCH, array: 2, maxConcurrent: 1, [field]: value };
    const problem = await refusedWithoutWrites(h.post("/v1/workloads", body), 400);
    expect(problem.errors.map((e) => e.path)).toEqual([field]);
  });
});

describe("media type", () => {
  test.each([
    "application/xml",
    "multipart/form-data; boundary=x",
    "text/html",
    // What `fetch` sends for a string body and `curl -d` for any: a client declaring text or
    // a form believes it sends something else, and is told to say application/json.
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
  ])("a body declared as %p is refused with 415, naming Content-Type", async (type) => {
    h = harness();
    const problem = await refusedWithoutWrites(
      h.request("/v1/workloads", {
        method: "POST",
        headers: { "Content-Type": type },
        body: JSON.stringify(BATCH),
      }),
      415,
    );
    expect(problem.errors.map((e) => e.path)).toEqual(["Content-Type"]);
  });

  test.each([
    "application/json",
    "application/json; charset=utf-8",
    "application/merge-patch+json",
  ])("a JSON body declared as %p is accepted", async (type) => {
    h = harness();
    const res = await h.request("/v1/workloads", {
      method: "POST",
      headers: { "Content-Type": type },
      body: JSON.stringify(BATCH),
    });
    expect(res.status).toBe(201);
  });
});

describe("methods and routes", () => {
  test.each([
    ["DELETE", "/v1/workloads", "GET, POST"],
    ["PUT", "/v1/workloads/w-abc", "GET"],
    ["GET", "/v1/workloads/w-abc/cancel", "POST"],
    ["POST", "/healthz", "GET"],
    ["DELETE", "/v1/workloads/w-abc/events", "GET"],
  ])("%s %s is 405 problem+json with Allow: %s", async (method, path, allow) => {
    h = harness();
    const before = h.rows();
    const res = await h.request(path, { method });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe(allow);
    expect((await problemOf(res)).detail).toContain(method);
    expect(h.rows()).toEqual(before);
  });

  test("an unknown path is still 404, and 405 does not bypass authentication", async () => {
    h = harness();
    expect((await h.request("/v2/nothing", { method: "DELETE" })).status).toBe(404);
    const res = await h.request(
      "/v1/workloads",
      { method: "DELETE" },
      { kind: "Bearer", token: "t" },
    );
    expect(res.status).toBe(401);
  });
});

describe("bearer token syntax", () => {
  test("extra spaces around the token are tolerated; the token itself is not", async () => {
    h = harness();
    const access = { kind: "Bearer", token: "s3cret" } as const;
    const get = (authorization: string) =>
      h.request("/v1/profiles", { headers: { Authorization: authorization } }, access);
    expect((await get("Bearer s3cret")).status).toBe(200);
    expect((await get("Bearer   s3cret  ")).status).toBe(200);
    expect((await get("bearer s3cret")).status).toBe(200);
    expect((await get("Bearer s3cre")).status).toBe(401);
    expect((await get("Bearer s3cret x")).status).toBe(401);
    expect((await get("Bearers3cret")).status).toBe(401);
    expect((await get("Basic s3cret")).status).toBe(401);
  });
});

describe("commands must be valid UTF-8", () => {
  const bytes = (...parts: (string | number[])[]) =>
    Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))));

  test("invalid UTF-8 bytes in an argument are refused, naming the argument", async () => {
    h = harness();
    const body = bytes('{"kind":"BATCH","profile":"default","command":["echo","a', [0xff], 'b"]}');
    const problem = await refusedWithoutWrites(h.post("/v1/workloads", body), 400);
    expect(problem.errors).toEqual([{ path: "command[1]", message: "must be valid UTF-8" }]);
  });

  test("an overlong encoding (a disguised '/') is refused, not decoded", async () => {
    h = harness();
    const body = bytes(
      '{"kind":"BATCH","profile":"default","command":["ls","',
      [0xc0, 0xaf],
      '"]}',
    );
    const problem = await refusedWithoutWrites(h.post("/v1/workloads", body), 400);
    expect(problem.errors.map((e) => e.path)).toEqual(["command[1]"]);
  });

  test("invalid bytes outside any string are refused as the body", async () => {
    h = harness();
    const body = bytes('{"kind":"BATCH",', [0xfe], '"profile":"default","command":["x"]}');
    const problem = await refusedWithoutWrites(h.post("/v1/workloads", body), 400);
    expect(problem.errors).toEqual([{ path: "", message: "body is not valid UTF-8" }]);
  });

  test("a lone surrogate (valid JSON escape, invalid text) is refused, naming the field", async () => {
    h = harness();
    const body =
      '{"kind":"BATCH","profile":"default","command":["echo","x\\ud800"],"env":{"A":"\\udfff"}}';
    const problem = await refusedWithoutWrites(h.post("/v1/workloads", body), 400);
    expect(problem.errors.map((e) => e.path)).toEqual(["command[1]", "env.A"]);
  });

  test("a body nested 200,000 deep is a 400, not a stack overflow's 500", async () => {
    h = harness();
    const depth = 200_000;
    const body = `{"kind":"BATCH","profile":"default","command":["x"],"env":${"[".repeat(depth)}${"]".repeat(depth)}}`;
    const problem = await refusedWithoutWrites(h.post("/v1/workloads", body), 400);
    expect(problem.errors.map((e) => e.path)).toEqual(["env"]);
  });

  test("a well-formed U+FFFD and astral characters are accepted", async () => {
    h = harness();
    const res = await h.post("/v1/workloads", { ...BATCH, command: ["echo", "\uFFFD 🧪"] });
    expect(res.status).toBe(201);
  });
});

describe("unknown and repeated query parameters, and bodies a route does not take", () => {
  test.each([
    ["GET", "/healthz?verbose=1"],
    ["GET", "/v1/profiles?all=1"],
    ["GET", "/v1/workloads/w-abc?fields=id"],
    ["GET", "/v1/workloads/w-abc/events?since=0"],
    ["GET", "/v1/diagnostics?deep=true"],
    ["GET", "/metrics?format=json"],
    ["GET", "/openapi.json?v=2"],
    ["GET", "/v1/workloads?junk="],
    ["POST", "/v1/workloads/w-abc/cancel?force=1"],
    ["POST", "/v1/backup?destination=/etc/x"],
  ])("%s %s is refused with 400 naming the parameter", async (method, path) => {
    h = harness();
    const name = [...new URL(path, "http://x").searchParams.keys()][0] ?? "";
    const problem = await refusedWithoutWrites(h.request(path, { method }), 400);
    expect(problem.errors.map((e) => e.path)).toEqual([name]);
  });

  test.each(["/v1/workloads?limit=1&limit=500", "/v1/workloads/w-abc/logs?attempt=1&attempt=2"])(
    "a parameter given twice is refused, not resolved by a guess: %s",
    async (path) => {
      h = harness();
      const problem = await refusedWithoutWrites(h.request(path), 400);
      expect(problem.errors[0]?.message).toContain("more than once");
    },
  );

  test("POST /v1/backup with a destination in the body is refused, not answered with a copy", async () => {
    h = harness();
    const problem = await refusedWithoutWrites(
      h.post("/v1/backup", { destination: "/etc/x" }),
      400,
    );
    expect(problem.errors).toEqual([
      { path: "destination", message: 'unknown field "destination"' },
    ]);
  });

  test("POST cancel with a body field is refused; with {} or no body it is not", async () => {
    h = harness();
    const created = await h.post("/v1/workloads", BATCH);
    const id = ((await created.json()) as { id: string }).id;
    const problem = await refusedWithoutWrites(
      h.post(`/v1/workloads/${id}/cancel`, { reason: "x" }),
      400,
    );
    expect(problem.errors.map((e) => e.path)).toEqual(["reason"]);
    expect((await h.post(`/v1/workloads/${id}/cancel`, {})).status).toBe(202);
    expect((await h.request(`/v1/workloads/${id}/cancel`, { method: "POST" })).status).toBe(202);
  });
});
