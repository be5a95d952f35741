/**
 * Dependencies and held workloads at the API's edge (issue 35): a dependency on another
 * principal's workload is refused exactly as one on a missing workload (404 naming the
 * field, nothing written), a SESSION cannot run after others, and release is the owner's
 * (404 for another principal), idempotent, and refused for one that ended while held.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const ADMIN_TOKEN = "admin-secret-token";
const TCP: Access = { kind: "Bearer", token: ADMIN_TOKEN };
type Who = { readonly token: string };
const ADMIN: Who = { token: ADMIN_TOKEN };

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

function make(): Harness {
  // Attempts minted at admission, as the daemon does: a held one must not get one.
  const h = harness({ mintsAtAdmission: true });
  open.push(h);
  return h;
}

function json(method: string, body?: unknown): RequestInit {
  return {
    method,
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  };
}

function call(h: Harness, path: string, init: RequestInit, who: Who): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${who.token}`);
  return h.request(path, { ...init, headers }, TCP);
}

async function principal(h: Harness, name: string): Promise<Who> {
  expect((await h.request("/v1/principals", json("POST", { name }))).status).toBe(201);
  const issued = await call(h, `/v1/principals/${name}/tokens`, json("POST", {}), ADMIN);
  return { token: ((await issued.json()) as { token: string }).token };
}

const batch = { kind: "BATCH", profile: "default", command: ["echo", "hi"] };

async function created(res: Response): Promise<{ id: string; held: boolean; after: unknown[] }> {
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; held: boolean; after: unknown[] };
}

describe("dependencies", () => {
  test("another principal's workload is answered as a missing one, naming the field", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const mine = await created(await call(h, "/v1/workloads", json("POST", batch), alice));
    const count = () => h.store.db.$client.query("SELECT count(*) AS n FROM workloads").get();
    const before = count();

    const foreign = await call(
      h,
      "/v1/workloads",
      json("POST", { ...batch, afterOk: [mine.id] }),
      bob,
    );
    const missing = await call(
      h,
      "/v1/workloads",
      json("POST", { ...batch, afterOk: ["w-missing"] }),
      bob,
    );
    expect([foreign.status, missing.status]).toEqual([404, 404]);
    const a = await problemOf(foreign);
    const b = await problemOf(missing);
    expect(a.detail).toBe("not found: afterOk[0]");
    expect(a.detail).toBe(b.detail);
    expect(JSON.stringify(a).replace(mine.id, "X")).toBe(
      JSON.stringify(b).replace("w-missing", "X"),
    );
    expect(count()).toEqual(before);

    // Its own, and the admin naming anyone's, are admitted and shown.
    const own = await created(
      await call(h, "/v1/workloads", json("POST", { ...batch, afterAny: [mine.id] }), alice),
    );
    expect(own.after).toEqual([{ kind: "afterany", workloadId: mine.id }]);
    await created(
      await call(h, "/v1/workloads", json("POST", { ...batch, afterOk: [mine.id] }), ADMIN),
    );
  });

  test("a SESSION cannot run after others (400 naming the field)", async () => {
    const h = make();
    const parent = await created(await h.post("/v1/workloads", batch));
    const res = await h.post("/v1/workloads", {
      kind: "SESSION",
      profile: "interactive",
      afterOk: [parent.id],
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await problemOf(res))).toContain("afterOk");
  });
});

describe("hold and release", () => {
  test("held has no attempt; release is the owner's, idempotent, and refused once ended", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const held = await created(
      await call(h, "/v1/workloads", json("POST", { ...batch, hold: true }), alice),
    );
    expect(held.held).toBe(true);
    // Nothing handed to the reconciler to submit: its first attempt waits for the release.
    expect(h.admitted.filter((a) => a.workloadId === held.id && a.attemptId !== null)).toEqual([]);

    const foreign = await call(h, `/v1/workloads/${held.id}/release`, json("POST"), bob);
    expect(foreign.status).toBe(404);
    const stillHeld = await call(h, `/v1/workloads/${held.id}`, {}, alice);
    expect(((await stillHeld.json()) as { held: boolean }).held).toBe(true);

    const released = await call(h, `/v1/workloads/${held.id}/release`, json("POST"), alice);
    expect(released.status).toBe(202);
    expect(await released.json()).toMatchObject({ held: false, phase: "PENDING", reason: null });
    const again = await call(h, `/v1/workloads/${held.id}/release`, json("POST"), alice);
    expect(again.status).toBe(202);

    const other = await created(await h.post("/v1/workloads", { ...batch, hold: true }));
    h.store.db.$client
      .query("UPDATE workloads SET phase = 'CANCELLED', reason = 'USER_CANCELLED' WHERE id = ?")
      .run(other.id);
    const late = await h.post(`/v1/workloads/${other.id}/release`, {});
    expect(late.status).toBe(409);
  });
});
