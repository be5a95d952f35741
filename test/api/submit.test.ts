import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { IsolationVerdict } from "../../src/core/ports/allocation-backend.ts";
import { type Harness, harness, problemOf, snapshotFiles } from "../support/api-harness.ts";
import { eventually } from "../support/eventually.ts";
import { fakeBackend } from "../support/fake-backend.ts";

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

describe("POST /v1/workloads", () => {
  test("201 with the workload in the documented shape, Location, one event, reconciler woken", async () => {
    const h = make();
    const res = await h.post("/v1/workloads", { ...batch, env: { B: "2", A: "1" } });
    expect(res.status).toBe(201);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(
      [
        "id",
        "kind",
        "name",
        "profile",
        "environment",
        "resources",
        "owner",
        "held",
        "after",
        "phase",
        "reason",
        "message",
        "hint",
        "specRevision",
        "executionEpoch",
        "createdAt",
        "updatedAt",
        "lastActiveAt",
        "exitCode",
        "conditions",
        "allocations",
        "deadline",
        "phaseConfirmedAt",
        "timeRemainingSeconds",
      ].sort(),
    );
    expect(body).toMatchObject({
      kind: "BATCH",
      name: "echo",
      profile: "default",
      phase: "PENDING",
      reason: null,
      specRevision: 1,
      executionEpoch: 0,
      createdAt: new Date(h.clock.now()).toISOString(),
      lastActiveAt: null,
      exitCode: null,
      hint: null,
      conditions: [
        {
          type: "SCHEDULED",
          status: "FALSE",
          reason: "NOT_SCHEDULED",
          message: "not scheduled yet",
          lastTransitionTime: new Date(h.clock.now()).toISOString(),
        },
      ],
      allocations: [],
    });
    expect(String(body["id"])).toMatch(/^w-[a-z0-9]{20}$/);
    expect(res.headers.get("location")).toBe(`/v1/workloads/${body["id"]}`);
    expect(h.rows()).toEqual({ workloads: 1, events: 1, allocations: 0 });
    expect(h.wakes.count).toBe(1);
    const spec = h.sqlite.query("SELECT spec_json FROM workloads").get() as { spec_json: string };
    expect(JSON.parse(spec.spec_json)).toEqual({
      command: ["echo", "hi"],
      env: { A: "1", B: "2" },
    });
  });

  test("on a degraded profile the workload is admitted PENDING, with no attempt to hand over", async () => {
    const h = make({ mintsAtAdmission: true });
    h.breakers.push({
      profile: "default",
      state: { kind: "Open", consecutiveRejections: 3, message: "no", openedAtMs: 0, retryAtMs: 1 },
    });
    const res = await h.post("/v1/workloads", batch);
    expect(res.status).toBe(201);
    const body = (await res.json()) as { id: string; phase: string; allocations: unknown[] };
    expect(body.phase).toBe("PENDING");
    expect(body.allocations).toEqual([]);
    expect(h.admitted).toEqual([{ workloadId: body.id, attemptId: null }]);
  });

  test("as the daemon admits: the first attempt is minted with the workload and handed to the reconciler", async () => {
    const h = make({ mintsAtAdmission: true });
    const res = await h.post("/v1/workloads", batch);
    expect(res.status).toBe(201);
    const body = (await res.json()) as {
      id: string;
      phase: string;
      executionEpoch: number;
      allocations: { id: string; phase: string; epoch: number }[];
    };
    expect(body.phase).toBe("SUBMITTING");
    expect(body.executionEpoch).toBe(1);
    expect(body.allocations.map((a) => [a.phase, a.epoch])).toEqual([["SUBMITTING", 1]]);
    expect(h.rows()).toEqual({ workloads: 1, events: 2, allocations: 1 });
    expect(h.admitted).toEqual([
      { workloadId: body.id, attemptId: body.allocations[0]?.id ?? null },
    ]);
    // The view built without reading back is the one a read gives.
    const read = await (await h.request(`/v1/workloads/${body.id}`)).json();
    expect(read).toEqual(body);
    // A replay (same key, same body) creates nothing and hands nothing over again.
    const first = await h.post("/v1/workloads", batch, { "Idempotency-Key": "k1" });
    const again = await h.post("/v1/workloads", batch, { "Idempotency-Key": "k1" });
    expect([first.status, again.status]).toEqual([201, 200]);
    expect(h.rows()).toEqual({ workloads: 2, events: 4, allocations: 2 });
    expect(h.admitted).toHaveLength(2);
  });

  test("a SESSION shows the five conditions, UNKNOWN until observed", async () => {
    const h = make({
      backend: fakeBackend({
        capabilities: {
          sessionIsolation: {
            verifySessionIsolation: async (): Promise<IsolationVerdict> => ({
              kind: "Verified",
              mechanism: "test",
            }),
          },
        },
      }),
    });
    const res = await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { conditions: { type: string; status: string }[] };
    expect(body.conditions.map((c) => `${c.type}:${c.status}`)).toEqual([
      "SCHEDULED:FALSE",
      "ALLOCATION_RUNNING:UNKNOWN",
      "WORKER_CONNECTED:UNKNOWN",
      "WORKSPACE_VISIBLE:UNKNOWN",
      "KERNEL_RESPONSIVE:UNKNOWN",
      "READY:UNKNOWN",
    ]);
  });

  // Each case: the body (or raw text), the field the 400 must name.
  const invalid: [string, unknown, string][] = [
    ["an unknown field", { ...batch, partitionHint: "x" }, "partitionHint"],
    ["a missing kind", { profile: "default", command: ["x"] }, "kind"],
    ["an unknown kind", { ...batch, kind: "CRON" }, "kind"],
    ["a missing profile", { kind: "BATCH", command: ["x"] }, "profile"],
    ["an unknown profile", { ...batch, profile: "gpu-huge" }, "profile"],
    ["a profile that refuses the kind", { kind: "SESSION", profile: "default" }, "profile"],
    ["BATCH without command", { kind: "BATCH", profile: "default" }, "command"],
    ["an empty command", { ...batch, command: [] }, "command"],
    ["an empty program", { ...batch, command: ["", "x"] }, "command[0]"],
    ["a NUL in an argument", { ...batch, command: ["echo", "a\u0000b"] }, "command[1]"],
    ["a non-string argument", { ...batch, command: ["echo", 3] }, "command[1]"],
    [
      "SESSION with a command",
      { kind: "SESSION", profile: "interactive", command: ["x"] },
      "command",
    ],
    ["a bad env name", { ...batch, env: { "A-B": "1" } }, "env.A-B"],
    ["a reserved env name", { ...batch, env: { OPENAI4S_TOKEN: "1" } }, "env.OPENAI4S_TOKEN"],
    ["a NUL in an env value", { ...batch, env: { A: "\u0000" } }, "env.A"],
    ["a non-string env value", { ...batch, env: { A: 1 } }, "env.A"],
    ["a zero time limit", { ...batch, timeLimitSeconds: 0 }, "timeLimitSeconds"],
    ["a fractional time limit", { ...batch, timeLimitSeconds: 1.5 }, "timeLimitSeconds"],
    ["a time limit over the profile's", { ...batch, timeLimitSeconds: 3601 }, "timeLimitSeconds"],
    ["a time limit as a string", { ...batch, timeLimitSeconds: "60" }, "timeLimitSeconds"],
    ["an idle timeout on BATCH", { ...batch, idleTimeoutSeconds: 600 }, "idleTimeoutSeconds"],
    ["zero attempts", { ...batch, maxAttempts: 0 }, "maxAttempts"],
    ["eleven attempts", { ...batch, maxAttempts: 11 }, "maxAttempts"],
    ["a name with a slash", { ...batch, name: "a/b" }, "name"],
    ["a name starting with a dash", { ...batch, name: "-rf" }, "name"],
    ["a name too long", { ...batch, name: "a".repeat(64) }, "name"],
    ["a body that is an array", [batch], ""],
    ["a body that is not JSON", "{kind:", ""],
    ["an empty body", "", ""],
  ];

  test.each(invalid)("%s is a 400 naming the field, and writes nothing", async (_l, body, path) => {
    const h = make();
    const before = h.rows();
    const res = await h.post("/v1/workloads", body);
    expect(res.status).toBe(400);
    const problem = await problemOf(res);
    expect(problem.status).toBe(400);
    expect(problem.type).toBe("urn:openai4s:problem:validation-failed");
    expect(problem.errors.map((e) => e.path)).toContain(path);
    for (const e of problem.errors) expect(e.message.length).toBeGreaterThan(0);
    expect(h.rows()).toEqual(before);
    expect(h.wakes.count).toBe(0);
  });

  test("every invalid field is reported at once", async () => {
    const h = make();
    const res = await h.post("/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["x"],
      maxAttempts: 0,
      name: "/",
      extra: true,
    });
    const problem = await problemOf(res);
    expect(problem.errors.map((e) => e.path).sort()).toEqual(["extra", "maxAttempts", "name"]);
    expect(problem.errors.find((e) => e.path === "extra")?.message).toBe('unknown field "extra"');
  });

  test("a bad Idempotency-Key is a 400 naming the header", async () => {
    const h = make();
    const res = await h.post("/v1/workloads", batch, { "Idempotency-Key": "has space" });
    expect(res.status).toBe(400);
    expect((await problemOf(res)).errors[0]?.path).toBe("Idempotency-Key");
    expect(h.rows().workloads).toBe(0);
  });

  test("a body over 1 MiB is a 413 and writes nothing", async () => {
    const h = make();
    const res = await h.post("/v1/workloads", {
      ...batch,
      command: Array.from({ length: 40 }, () => "x".repeat(30_000)),
    });
    expect(res.status).toBe(413);
    expect(h.rows().workloads).toBe(0);
  });
});

describe("Idempotency-Key", () => {
  test("same key, same request: 200 with the same workload and no second row", async () => {
    const h = make();
    const first = await h.post("/v1/workloads", batch, { "Idempotency-Key": "k-1" });
    expect(first.status).toBe(201);
    const created = (await first.json()) as { id: string };
    // Same request spelled differently: key order and an explicit default.
    const again = await h.post(
      "/v1/workloads",
      { command: ["echo", "hi"], maxAttempts: 1, profile: "default", kind: "BATCH" },
      { "Idempotency-Key": "k-1" },
    );
    expect(again.status).toBe(200);
    expect(((await again.json()) as { id: string }).id).toBe(created.id);
    expect(h.rows().workloads).toBe(1);
    expect(h.wakes.count).toBe(1);
  });

  test("same key, different request: 409 and nothing written", async () => {
    const h = make();
    await h.post("/v1/workloads", batch, { "Idempotency-Key": "k-2" });
    const before = h.rows();
    const res = await h.post(
      "/v1/workloads",
      { ...batch, command: ["echo", "bye"] },
      { "Idempotency-Key": "k-2" },
    );
    expect(res.status).toBe(409);
    expect((await problemOf(res)).type).toBe("urn:openai4s:problem:idempotency-key-reused");
    expect(h.rows()).toEqual(before);
  });

  test("different keys create different workloads", async () => {
    const h = make();
    await h.post("/v1/workloads", batch, { "Idempotency-Key": "a" });
    const res = await h.post("/v1/workloads", batch, { "Idempotency-Key": "b" });
    expect(res.status).toBe(201);
    expect(h.rows().workloads).toBe(2);
  });

  test("two requests racing on one key: one row, both answers name it", async () => {
    // The isolation check is the await between the key lookup and the insert; holding it
    // lets both requests pass the lookup before either inserts.
    const gate = Promise.withResolvers<IsolationVerdict>();
    let checks = 0;
    const h = make({
      backend: fakeBackend({
        capabilities: {
          sessionIsolation: {
            verifySessionIsolation: () => {
              checks++;
              return gate.promise;
            },
          },
        },
      }),
    });
    const body = { kind: "SESSION", profile: "interactive" };
    const a = h.post("/v1/workloads", body, { "Idempotency-Key": "race" });
    const b = h.post("/v1/workloads", body, { "Idempotency-Key": "race" });
    // Both requests hold at the gate, past the key lookup, before either may insert.
    await eventually(() => checks === 2, { what: "both requests at the isolation check" });
    gate.resolve({ kind: "Verified", mechanism: "test" });
    const [ra, rb] = await Promise.all([a, b]);
    expect([ra.status, rb.status].sort()).toEqual([200, 201]);
    const ids = await Promise.all([ra.json(), rb.json()]);
    expect((ids[0] as { id: string }).id).toBe((ids[1] as { id: string }).id);
    expect(h.rows().workloads).toBe(1);
  });

  test("racing on one key with different bodies: the loser gets 409", async () => {
    const gate = Promise.withResolvers<IsolationVerdict>();
    let checks = 0;
    const h = make({
      backend: fakeBackend({
        capabilities: {
          sessionIsolation: {
            verifySessionIsolation: () => {
              checks++;
              return gate.promise;
            },
          },
        },
      }),
    });
    const a = h.post(
      "/v1/workloads",
      { kind: "SESSION", profile: "interactive" },
      {
        "Idempotency-Key": "race2",
      },
    );
    const b = h.post(
      "/v1/workloads",
      { kind: "SESSION", profile: "interactive", name: "other" },
      { "Idempotency-Key": "race2" },
    );
    // Both requests hold at the gate, past the key lookup, before either may insert.
    await eventually(() => checks === 2, { what: "both requests at the isolation check" });
    gate.resolve({ kind: "Verified", mechanism: "test" });
    const statuses = (await Promise.all([a, b])).map((r) => r.status).sort();
    expect(statuses).toEqual([201, 409]);
    expect(h.rows().workloads).toBe(1);
  });
});

describe("SESSION admission needs verified isolation", () => {
  const backends: [string, () => ReturnType<typeof fakeBackend>][] = [
    ["a backend without the capability", () => fakeBackend()],
    [
      "a backend whose check says Unverified",
      () =>
        fakeBackend({
          capabilities: {
            sessionIsolation: {
              verifySessionIsolation: async (): Promise<IsolationVerdict> => ({
                kind: "Unverified",
                message: "probe saw the canary",
              }),
            },
          },
        }),
    ],
    [
      "a backend whose check throws",
      () =>
        fakeBackend({
          capabilities: {
            sessionIsolation: {
              verifySessionIsolation: async () => {
                throw new Error("bwrap: not found");
              },
            },
          },
        }),
    ],
    [
      "a backend whose check returns garbage",
      // Deliberately outside the type: what a broken backend could answer at run time.
      () =>
        fakeBackend({
          capabilities: {
            sessionIsolation: {
              verifySessionIsolation: async () => ({ kind: "Sure" }) as unknown as IsolationVerdict,
            },
          },
        }),
    ],
  ];

  test.each(backends)("%s: 409 ISOLATION_UNAVAILABLE, no row, no file", async (_l, backend) => {
    const h = make({ backend: backend() });
    // A state dir with some content, to prove none of it moves.
    mkdirSync(join(h.dir, "workloads", "w-old", "workspace"), { recursive: true });
    writeFileSync(join(h.dir, "workloads", "w-old", "workspace", "data.csv"), "1,2\n");
    const files = snapshotFiles(h.dir);
    const before = h.rows();
    const res = await h.post(
      "/v1/workloads",
      { kind: "SESSION", profile: "interactive", idleTimeoutSeconds: 900 },
      { "Idempotency-Key": "s-1" },
    );
    expect(res.status).toBe(409);
    const problem = await problemOf(res);
    expect(problem.reason).toBe("ISOLATION_UNAVAILABLE");
    expect(problem.type).toBe("urn:openai4s:problem:isolation-unavailable");
    expect(problem.detail.length).toBeGreaterThan(0);
    expect(h.rows()).toEqual(before);
    expect(snapshotFiles(h.dir)).toEqual(files);
    expect(h.wakes.count).toBe(0);
  });

  test("BATCH on the same backend is not affected", async () => {
    const h = make();
    const res = await h.post("/v1/workloads", { ...batch, profile: "interactive" });
    expect(res.status).toBe(201);
  });
});
