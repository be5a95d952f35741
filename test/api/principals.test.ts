/**
 * Principals, tokens, ownership and limits (issue 22), in process: two principals cannot
 * see or touch each other's workloads by any route of the OpenAPI document; limits hold
 * under concurrent submissions; tokens are stored as hashes, expire and are revoked.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createWorkload } from "../../src/adapters/store-sqlite/index.ts";
import type { ResourceProfile } from "../../src/core/models.ts";
import { limitExceeded, NO_LIMITS, resourcesHeld } from "../../src/core/principals.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { kernelIdOf } from "../../src/servers/http/jupyter/ids.ts";
import { openApiDocument } from "../../src/servers/http/system/openapi.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const ADMIN_TOKEN = "admin-secret-token";
/** A TCP listener's access; `Who` is the token a request presents on it. */
const TCP: Access = { kind: "Bearer", token: ADMIN_TOKEN };
type Who = { readonly token: string };
const ADMIN: Who = { token: ADMIN_TOKEN };

/** A request over TCP, presenting `who`'s token (the harness's default is the socket). */
function call(h: Harness, path: string, init: RequestInit, who: Who): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${who.token}`);
  return h.request(path, { ...init, headers }, TCP);
}

const open: Harness[] = [];
function make(options: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness(options);
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const batch = { kind: "BATCH", profile: "default", command: ["echo", "hi"] };

/** A SESSION row as admission would store it for `owner` (no sessions service needed). */
function sessionRow(id: string, owner: string) {
  return {
    id,
    kind: "SESSION" as const,
    name: id,
    profile: "interactive",
    spec: {},
    maxAttempts: 1,
    idempotencyKey: null,
    requestHash: null,
    owner,
  };
}

function json(method: string, body?: unknown): RequestInit {
  return {
    method,
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  };
}

/** The admin adds a principal (over the socket) and issues it a token. */
async function principal(
  h: Harness,
  name: string,
  limits: Record<string, number | null> = {},
  expiresInSeconds?: number,
): Promise<{ access: Who; tokenId: string; token: string }> {
  const added = await h.request("/v1/principals", json("POST", { name, ...limits }));
  expect(added.status).toBe(201);
  const issued = await call(
    h,
    `/v1/principals/${name}/tokens`,
    json("POST", expiresInSeconds === undefined ? {} : { expiresInSeconds }),
    ADMIN,
  );
  expect(issued.status).toBe(201);
  const body = (await issued.json()) as { id: string; token: string };
  return { access: { token: body.token }, tokenId: body.id, token: body.token };
}

async function submitAs(h: Harness, access: Who, body: unknown = batch): Promise<Response> {
  return await call(h, "/v1/workloads", json("POST", body), access);
}

describe("ownership", () => {
  test("a principal sees only its own workloads; another's answers exactly as a missing one", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const mine = (await (await submitAs(h, alice.access)).json()) as { id: string; owner: string };
    expect(mine.owner).toBe("alice");
    const admins = (await (await submitAs(h, ADMIN)).json()) as { id: string; owner: null };
    expect(admins.owner).toBeNull();

    const foreign = await call(h, `/v1/workloads/${mine.id}`, {}, bob.access);
    const missing = await call(h, "/v1/workloads/no-such-id", {}, bob.access);
    expect(foreign.status).toBe(404);
    expect(missing.status).toBe(404);
    const a = await problemOf(foreign);
    const b = await problemOf(missing);
    // Same words apart from the id itself: nothing says the workload exists.
    expect(a.detail.replace(mine.id, "X")).toBe(b.detail.replace("no-such-id", "X"));

    const ids = async (access: Who, query = "") =>
      (
        (await (await call(h, `/v1/workloads${query}`, {}, access)).json()) as {
          items: { id: string }[];
        }
      ).items.map((w) => w.id);
    expect(await ids(bob.access)).toEqual([]);
    expect(await ids(bob.access, "?owner=alice")).toEqual([]);
    expect(await ids(alice.access)).toEqual([mine.id]);
    expect((await ids(ADMIN)).sort()).toEqual([mine.id, admins.id].sort());
    expect(await ids(ADMIN, "?owner=alice")).toEqual([mine.id]);
    expect((await call(h, `/v1/workloads/${mine.id}`, {}, alice.access)).status).toBe(200);
  });

  test("every route of the OpenAPI document, as another principal: 403 or 404, nothing changed", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const mine = (await (await submitAs(h, alice.access)).json()) as { id: string };
    const before = await (await call(h, `/v1/workloads/${mine.id}`, {}, ADMIN)).text();
    const doc = openApiDocument("test") as { paths: Record<string, Record<string, unknown>> };
    // What a principal may call that names no one else's workload or principal.
    const open = new Set([
      "GET /healthz",
      "GET /openapi.json",
      "GET /v1/profiles",
      "GET /v1/workloads",
      "POST /v1/workloads",
      // Jupyter's: the version, the kernelspecs (profiles), the caller's own kernels.
      "GET /api",
      "GET /api/kernelspecs",
      "GET /api/kernelspecs/{name}",
      "GET /api/kernels",
      "POST /api/kernels",
      // The direct Jupyter server: the caller's own sessions and contents root (the root
      // takes no writes: 400 for anyone).
      "GET /api/sessions",
      "POST /api/sessions",
      "GET /api/contents",
      "GET /api/contents/",
      "POST /api/contents",
    ]);
    let walked = 0;
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const method of Object.keys(methods).map((m) => m.toUpperCase())) {
        if (open.has(`${method} ${path}`)) continue;
        const url = path
          .replace("/v1/tokens/{id}", `/v1/tokens/${alice.tokenId}`)
          .replace("{id}", mine.id)
          .replace("{kid}", kernelIdOf(mine.id))
          .replace("{name}", "alice")
          .replace("{path}", `${mine.id}/a.ipynb`)
          .replace("{cid}", "checkpoint")
          .replace("{sid}", "any-session");
        const res = await call(
          h,
          url,
          method === "GET" ? {} : json(method, method === "DELETE" ? undefined : {}),
          bob.access,
        );
        expect({ route: `${method} ${path}`, status: res.status }).toEqual({
          route: `${method} ${path}`,
          status: /^\/(v1\/workloads|api\/(kernels|contents|sessions))\//.test(url) ? 404 : 403,
        });
        walked += 1;
      }
    }
    expect(walked).toBeGreaterThanOrEqual(12);
    // Nothing happened to alice's workload, principal or token.
    expect(await (await call(h, `/v1/workloads/${mine.id}`, {}, ADMIN)).text()).toBe(before);
    expect((await call(h, "/v1/workloads", {}, alice.access)).status).toBe(200);
  });

  test("an Idempotency-Key is the principal's own: the same key from two principals makes two workloads", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const key = { "Idempotency-Key": "shared-key" };
    const post = (who: Who, body: unknown = batch) =>
      call(
        h,
        "/v1/workloads",
        { ...json("POST", body), headers: { "Content-Type": "application/json", ...key } },
        who,
      );
    const first = await post(alice.access);
    expect(first.status).toBe(201);
    const aliceId = ((await first.json()) as { id: string }).id;
    // Bob, with alice's key and another body: no 409 that would tell him alice used it.
    const other = await post(bob.access, { ...batch, command: ["echo", "bob"] });
    expect(other.status).toBe(201);
    const bobs = (await other.json()) as { id: string; owner: string };
    expect(bobs.owner).toBe("bob");
    expect(bobs.id).not.toBe(aliceId);
    // Each principal's retry replays its own workload; the admin's key space is its own too.
    expect(((await (await post(alice.access)).json()) as { id: string }).id).toBe(aliceId);
    const bobAgain = await post(bob.access, { ...batch, command: ["echo", "bob"] });
    expect(((await bobAgain.json()) as { id: string }).id).toBe(bobs.id);
    const admins = await post(ADMIN);
    expect(admins.status).toBe(201);
    const adminId = ((await admins.json()) as { id: string }).id;
    expect(new Set([aliceId, bobs.id, adminId]).size).toBe(3);
    expect(((await (await post(ADMIN)).json()) as { id: string }).id).toBe(adminId);
    // Reuse with another body is still refused, within one principal.
    expect((await post(alice.access, { ...batch, command: ["echo", "x"] })).status).toBe(409);
  });

  test("concurrent first uses of one key by two principals both succeed, once each", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const init = (): RequestInit => ({
      ...json("POST", batch),
      headers: { "Content-Type": "application/json", "Idempotency-Key": "race" },
    });
    const answers = await Promise.all(
      [alice, bob, alice, bob].map((p) => call(h, "/v1/workloads", init(), p.access)),
    );
    const bodies = (await Promise.all(answers.map((r) => r.json()))) as {
      id: string;
      owner: string;
    }[];
    expect(answers.map((r) => r.status).every((s) => s === 200 || s === 201)).toBe(true);
    expect(new Set(bodies.map((b) => b.id)).size).toBe(2);
    expect(new Set(bodies.map((b) => `${b.owner}:${b.id}`)).size).toBe(2);
  });
});

describe("limits", () => {
  test("20 concurrent submissions over a limit of 3 leave exactly 3; the rest 429 naming it", async () => {
    const h = make();
    const alice = await principal(h, "alice", { maxBatch: 3 });
    const answers = await Promise.all(Array.from({ length: 20 }, () => submitAs(h, alice.access)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(17);
    expect(h.rows().workloads).toBe(3);
    const refused = answers.find((r) => r.status === 429);
    const body = (await refused?.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ reason: "LIMIT_EXCEEDED", limit: "batch", current: 3, max: 3 });
    // Cancelled work no longer counts once it has ended; the admin is never limited.
    expect((await submitAs(h, ADMIN)).status).toBe(201);
  });

  test("CPUs held by live workloads: the profile's 2 CPUs each against a limit of 5", async () => {
    const h = make();
    const alice = await principal(h, "alice", { maxCpus: 5 });
    expect((await submitAs(h, alice.access)).status).toBe(201);
    expect((await submitAs(h, alice.access)).status).toBe(201);
    const third = await submitAs(h, alice.access);
    expect(third.status).toBe(429);
    expect(await third.json()).toMatchObject({ limit: "cpus", current: 4, max: 5 });
    // Another principal's usage is its own.
    const bob = await principal(h, "bob", { maxCpus: 2 });
    expect((await submitAs(h, bob.access)).status).toBe(201);
  });

  test("CPUs and GPUs its allocations hold at once: array elements at once, tasks x CPUs each", async () => {
    const wide: ResourceProfile = {
      name: "wide",
      description: "arrays and tasks",
      kinds: ["BATCH"],
      resources: { nodes: 1, cpus: 2, gpus: 1, memoryMb: null, timeLimitSeconds: 3600 },
      maxArraySize: 100,
      maxTasks: 8,
    };
    const h = make({ backend: fakeBackend({ profiles: () => [wide] }) });
    const alice = await principal(h, "alice", { maxCpus: 10, maxGpus: 4 });
    const asked = (spec: Record<string, unknown>) =>
      submitAs(h, alice.access, { ...batch, profile: "wide", ...spec });
    // Ten elements, two at once: 2 x 2 CPUs and 2 GPUs held, not one element's 2 and 1.
    expect((await asked({ array: 10, maxConcurrent: 2 })).status).toBe(201);
    // Four tasks of 2 CPUs each: 8 CPUs, over the 10 with the 4 already held.
    const tasks = await asked({ tasks: 4 });
    expect(tasks.status).toBe(429);
    expect(await tasks.json()).toMatchObject({ limit: "cpus", current: 4, max: 10 });
    // Three elements at once: 3 GPUs, over the 4 with the 2 already held.
    const gpus = await asked({ array: 3 });
    expect(gpus.status).toBe(429);
    expect(await gpus.json()).toMatchObject({ limit: "gpus", current: 2, max: 4 });
  });

  test("/metrics shows live work and held CPUs by owner", async () => {
    const h = make();
    const alice = await principal(h, "alice", {});
    expect((await submitAs(h, alice.access)).status).toBe(201);
    expect((await submitAs(h, alice.access)).status).toBe(201);
    expect((await submitAs(h, ADMIN)).status).toBe(201);
    const text = await (await call(h, "/metrics", {}, ADMIN)).text();
    expect(text).toContain('openai4s_owner_live_workloads{owner="alice",kind="BATCH"} 2');
    expect(text).toContain('openai4s_owner_held_cpus{owner="alice"} 4');
    expect(text).toContain('openai4s_owner_live_workloads{owner="admin",kind="BATCH"} 1');
  });

  test("a principal added without limits gets the daemon's defaults; null is unlimited", async () => {
    const h = make({
      principalDefaults: { maxSessions: 1, maxBatch: 2, maxCpus: null, maxGpus: 0 },
    });
    await h.request("/v1/principals", json("POST", { name: "dflt" }));
    await h.request("/v1/principals", json("POST", { name: "free", maxBatch: null }));
    const list = (await (await call(h, "/v1/principals", {}, ADMIN)).json()) as {
      items: { name: string; maxBatch: number | null; maxSessions: number | null }[];
    };
    expect(list.items.map((p) => [p.name, p.maxSessions, p.maxBatch])).toEqual([
      ["dflt", 1, 2],
      ["free", 1, null],
    ]);
  });

  test("a workload that ended frees its place", async () => {
    const h = make();
    const alice = await principal(h, "alice", { maxBatch: 1 });
    const first = (await (await submitAs(h, alice.access)).json()) as { id: string };
    expect((await submitAs(h, alice.access)).status).toBe(429);
    h.sqlite.run("UPDATE workloads SET phase = 'SUCCEEDED' WHERE id = ?", [first.id]);
    expect((await submitAs(h, alice.access)).status).toBe(201);
  });
});

describe("backup", () => {
  test("the store's copy carries principals, limits and token hashes, never a token", async () => {
    const h = make();
    const alice = await principal(h, "alice", { maxBatch: 4 });
    const res = await h.request("/v1/backup", { method: "POST" });
    expect(res.status).toBe(200);
    const bytes = new Uint8Array(await res.arrayBuffer());
    const { Database } = await import("bun:sqlite");
    const copy = Database.deserialize(bytes);
    try {
      expect(copy.query("SELECT name, max_batch AS maxBatch FROM principals").all()).toEqual([
        { name: "alice", maxBatch: 4 },
      ]);
      expect(copy.query("SELECT id FROM principal_tokens").all()).toEqual([{ id: alice.tokenId }]);
      expect(new TextDecoder().decode(bytes)).not.toContain(alice.token.slice(21));
    } finally {
      copy.close();
    }
  });
});

describe("tokens", () => {
  test("stored only as a hash; wrong secret, expired, revoked and removed tokens answer 401", async () => {
    const h = make();
    const alice = await principal(h, "alice", {}, 60);
    const stored = h.sqlite.query("SELECT * FROM principal_tokens").all();
    expect(JSON.stringify(stored)).not.toContain(alice.token.split("_").slice(2).join("_"));
    expect((await call(h, "/v1/workloads", {}, alice.access)).status).toBe(200);

    const wrong = `${alice.token.slice(0, -1)}${alice.token.endsWith("A") ? "B" : "A"}`;
    expect((await call(h, "/v1/workloads", {}, { token: wrong })).status).toBe(401);
    h.clock.advance(60_000);
    expect((await call(h, "/v1/workloads", {}, alice.access)).status).toBe(401);

    const fresh = await call(h, "/v1/principals/alice/tokens", json("POST", {}), ADMIN);
    const token = (await fresh.json()) as { id: string; token: string };
    const access: Who = { token: token.token };
    expect((await call(h, "/v1/workloads", {}, access)).status).toBe(200);
    const revoked = await call(h, `/v1/tokens/${token.id}/revoke`, json("POST"), ADMIN);
    expect(revoked.status).toBe(200);
    expect((await call(h, "/v1/workloads", {}, access)).status).toBe(401);
    // Idempotent; an unknown id is 404.
    expect((await call(h, `/v1/tokens/${token.id}/revoke`, json("POST"), ADMIN)).status).toBe(200);
    expect((await call(h, "/v1/tokens/0000000000000000/revoke", json("POST"), ADMIN)).status).toBe(
      404,
    );

    const other = await principal(h, "carol");
    expect((await call(h, "/v1/principals/carol", { method: "DELETE" }, ADMIN)).status).toBe(204);
    expect((await call(h, "/v1/workloads", {}, other.access)).status).toBe(401);
  });

  test("principal add refuses a taken name or unix user, and bad names, naming the field", async () => {
    const h = make();
    expect(
      (await h.request("/v1/principals", json("POST", { name: "alice", unixUser: "alice" })))
        .status,
    ).toBe(201);
    const again = await h.request("/v1/principals", json("POST", { name: "alice" }));
    expect(again.status).toBe(409);
    const user = await h.request("/v1/principals", json("POST", { name: "al", unixUser: "alice" }));
    expect((await problemOf(user)).detail).toContain("unix user");
    const bad = await h.request("/v1/principals", json("POST", { name: "../x" }));
    expect((await problemOf(bad)).errors[0]?.path).toBe("name");
    const list = (await (await call(h, "/v1/principals", {}, ADMIN)).json()) as {
      items: { name: string; unixUser: string }[];
    };
    expect(list.items.map((p) => [p.name, p.unixUser])).toEqual([["alice", "alice"]]);
  });
});

/**
 * Mutants of the authentication and ownership lines that no test above killed (issue 33):
 * each test below fails when the line it names is broken.
 */
describe("authentication's edges", () => {
  test("a removed principal's token that authentication holds in memory stops at once", async () => {
    const h = make();
    const carol = await principal(h, "carol");
    // Used first, so the access cache holds its row (principals/routes.ts forgetTokens).
    expect((await call(h, "/v1/workloads", {}, carol.access)).status).toBe(200);
    expect((await call(h, "/v1/principals/carol", { method: "DELETE" }, ADMIN)).status).toBe(204);
    expect((await call(h, "/v1/workloads", {}, carol.access)).status).toBe(401);
  });

  test("a principal's token with anything before or after it is not that token (the pattern's anchors)", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    expect((await call(h, "/v1/workloads", {}, alice.access)).status).toBe(200);
    for (const token of [`x${alice.token}`, `${alice.token}x`, `${alice.token}_`]) {
      expect({ token, status: (await call(h, "/v1/workloads", {}, { token })).status }).toEqual({
        token,
        status: 401,
      });
    }
  });

  test("?token= is honoured under /api only: a token in a /v1 URL authenticates nothing", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    for (const token of [ADMIN_TOKEN, alice.token]) {
      const q = `?token=${encodeURIComponent(token)}`;
      expect((await h.request(`/v1/workloads${q}`, {}, TCP)).status).toBe(401);
      expect((await h.request(`/v1/profiles${q}`, {}, TCP)).status).toBe(401);
      expect((await h.request(`/api/kernels${q}`, {}, TCP)).status).toBe(200);
    }
  });

  test("what a workload holds against a principal's CPU and GPU limits", () => {
    // Guards the count the CPU limit is checked with: tasks (2 and up) times CPUs per task,
    // else CPUs per node times nodes; each array element that may run at once counts.
    const r = { nodes: 1, cpus: 4, gpus: 1 };
    expect(resourcesHeld(r, {})).toEqual({ cpus: 4, gpus: 1 });
    expect(resourcesHeld(r, { tasks: 1 })).toEqual({ cpus: 4, gpus: 1 });
    expect(resourcesHeld(r, { tasks: 2 })).toEqual({ cpus: 8, gpus: 1 });
    expect(resourcesHeld({ ...r, nodes: 3 }, {})).toEqual({ cpus: 12, gpus: 3 });
    expect(resourcesHeld(r, { array: 10 })).toEqual({ cpus: 40, gpus: 10 });
    expect(resourcesHeld(r, { array: 10, maxConcurrent: 2 })).toEqual({ cpus: 8, gpus: 2 });
  });

  test("maxSessions: a principal's second live session is refused naming the limit", async () => {
    const h = make();
    await principal(h, "alice", { maxSessions: 1 });
    const limits = { ...NO_LIMITS, maxSessions: 1 };
    const session = (id: string) =>
      createWorkload(h.store, {
        ...sessionRow(id, "alice"),
        withinLimits: (usage) =>
          limitExceeded(limits, usage, { kind: "SESSION", cpus: 1, gpus: 0 }),
      });
    expect(session("w-s1").kind).toBe("Created");
    expect(session("w-s2")).toMatchObject({
      kind: "OverLimit",
      exceeded: { limit: "sessions", current: 1, max: 1 },
    });
    // A BATCH is not a session: still admitted.
    const batchRow = { ...sessionRow("w-b1", "alice"), kind: "BATCH" as const };
    const batchLimit = (usage: Parameters<typeof limitExceeded>[1]) =>
      limitExceeded(limits, usage, { kind: "BATCH", cpus: 1, gpus: 0 });
    expect(createWorkload(h.store, { ...batchRow, withinLimits: batchLimit }).kind).toBe("Created");
  });

  test("a principal uses its own kernel through /api/kernels/{id}; another's is a 404", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    createWorkload(h.store, sessionRow("w-abcde12345fghij67890", "alice"));
    const kid = kernelIdOf("w-abcde12345fghij67890");
    const mine = await call(h, `/api/kernels/${kid}`, {}, alice.access);
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { id: string }).id).toBe(kid);
    expect((await call(h, `/api/kernels/${kid}`, {}, bob.access)).status).toBe(404);
    const listed = (await (await call(h, "/api/kernels", {}, alice.access)).json()) as {
      id: string;
    }[];
    expect(listed.map((k) => k.id)).toEqual([kid]);
  });
});
