/** Every refusal carries a stable UPPER_SNAKE `reason` a script can switch on. */
import { afterEach, describe, expect, test } from "bun:test";
import { PROBLEMS, type ProblemSlug, problemReason } from "../../src/servers/http/problem.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

describe("problem reasons", () => {
  test("every known slug has an UPPER_SNAKE reason and a description", () => {
    for (const [slug, description] of Object.entries(PROBLEMS)) {
      expect(problemReason(slug as ProblemSlug)).toMatch(/^[A-Z][A-Z0-9_]*$/);
      expect(description.length).toBeGreaterThan(10);
    }
  });

  test("refusals of different kinds each carry their reason", async () => {
    const h = harness();
    open.push(h);
    const cases: [Promise<Response>, number, string][] = [
      [h.post("/v1/workloads", { kind: "BATCH" }), 400, "VALIDATION_FAILED"],
      [h.request("/v1/nothing"), 404, "NOT_FOUND"],
      [h.request("/v1/workloads/w-x"), 404, "NOT_FOUND"],
      [h.request("/v1/workloads", { method: "DELETE" }), 405, "METHOD_NOT_ALLOWED"],
      [
        h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" }),
        409,
        "ISOLATION_UNAVAILABLE",
      ],
      [h.request("/v1/profiles", {}, { kind: "Bearer", token: "right" }), 401, "UNAUTHORIZED"],
    ];
    for (const [pending, status, reason] of cases) {
      const res = await pending;
      expect(res.status).toBe(status);
      expect((await problemOf(res)).reason).toBe(reason);
    }
  });
});
