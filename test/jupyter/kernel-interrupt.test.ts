/**
 * POST /api/kernels/{id}/interrupt as Jupyter Server answers it: 204 once the interrupt is
 * delivered, 409 while the kernel is not ready (a client retries a conflict, not a gone
 * kernel), 404 for a kernel that is not there.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createWorkload } from "../../src/adapters/store-sqlite/index.ts";
import type { InterruptOutcome, SessionService } from "../../src/core/session/session-port.ts";
import { kernelIdOf } from "../../src/servers/http/jupyter/ids.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

let h: Harness;
afterEach(() => h?.close());

const SESSION = "w-abcde12345fghij67890";

function withInterrupt(outcome: InterruptOutcome): Harness {
  const sessions = {
    interrupt: async () => outcome,
  } as Partial<SessionService> as SessionService;
  const made = harness({ sessions });
  createWorkload(made.store, {
    id: SESSION,
    kind: "SESSION",
    name: SESSION,
    profile: "interactive",
    spec: {},
    maxAttempts: 1,
    idempotencyKey: null,
    requestHash: null,
  });
  return made;
}

const interrupt = (path = `/api/kernels/${kernelIdOf(SESSION)}/interrupt`) =>
  h.request(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: "{}",
  });

describe("interrupting a kernel", () => {
  test("delivered: 204", async () => {
    h = withInterrupt({ kind: "Ok", interrupted: true });
    expect((await interrupt()).status).toBe(204);
  });

  test("not ready yet: 409 session-not-ready, with the reason", async () => {
    h = withInterrupt({ kind: "NotReady", message: "the kernel is still starting" });
    const res = await interrupt();
    expect(res.status).toBe(409);
    const problem = await problemOf(res);
    expect(problem.detail).toContain("still starting");
  });

  test("no such kernel: 404", async () => {
    h = withInterrupt({ kind: "Ok", interrupted: true });
    const res = await interrupt("/api/kernels/00000000-0000-0000-0000-000000000000/interrupt");
    expect(res.status).toBe(404);
  });
});
