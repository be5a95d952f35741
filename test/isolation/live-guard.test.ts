/**
 * The root-only guarantee "an unsandboxed live allocation blocks sessions", as a unit: the
 * backend's own Verified verdict is turned down while any live allocation was launched
 * outside the verified sandbox, and those allocations are named (issue 18: this rested on
 * slow binary tests alone).
 */
import { describe, expect, test } from "bun:test";
import { guardedByLiveAllocations } from "../../src/orchestration/isolation/live-guard.ts";
import { sessionIsolationVerdict } from "../../src/orchestration/ports.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const verified = () =>
  fakeBackend({ verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }) });

describe("sessions wait for unsandboxed live allocations", () => {
  test("none live: the backend's verdict stands", async () => {
    const guarded = guardedByLiveAllocations(verified(), () => []);
    expect((await sessionIsolationVerdict(guarded)).kind).toBe("Verified");
  });

  test("one live outside the sandbox: Unverified, naming it", async () => {
    const guarded = guardedByLiveAllocations(verified(), () => ["alloc-unsandboxed"]);
    const verdict = await sessionIsolationVerdict(guarded);
    expect(verdict.kind).toBe("Unverified");
    expect(verdict.kind === "Unverified" && verdict.message).toContain("alloc-unsandboxed");
  });

  test("many: twenty named, the rest said to exist, the query bounded", async () => {
    let askedLimit = 0;
    const guarded = guardedByLiveAllocations(verified(), (limit) => {
      askedLimit = limit;
      return Array.from({ length: limit }, (_, i) => `a${i}`);
    });
    const verdict = await sessionIsolationVerdict(guarded);
    expect(askedLimit).toBe(21);
    expect(verdict.kind === "Unverified" && verdict.message).toContain("a19 and more");
    expect(verdict.kind === "Unverified" && verdict.message).not.toContain("a20");
  });

  test("an Unverified backend stays Unverified without asking the store", async () => {
    let asked = false;
    const backend = fakeBackend({
      verifySessionIsolation: async () => ({ kind: "Unverified", message: "no bwrap" }),
    });
    const guarded = guardedByLiveAllocations(backend, () => {
      asked = true;
      return [];
    });
    const verdict = await sessionIsolationVerdict(guarded);
    expect(verdict.kind === "Unverified" && verdict.message).toBe("no bwrap");
    expect(asked).toBe(false);
  });
});
