/**
 * A verified sandbox is not enough for a SESSION while a job launched outside it is still
 * live: that job runs as the same uid as every sandboxed one and could read the session's
 * workspace and credential. The guard is a unit here, so it does not rest on the slow
 * root-only binary tests alone.
 */
import { describe, expect, test } from "bun:test";
import { guardedByLiveAllocations } from "../../src/core/isolation/live-guard.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const verified = fakeBackend({
  capabilities: {
    sessionIsolation: {
      verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
    },
  },
});

async function verdictWith(unsandboxed: readonly string[]) {
  const asked: number[] = [];
  const guarded = guardedByLiveAllocations(verified, (limit) => {
    asked.push(limit);
    return unsandboxed.slice(0, limit);
  });
  const provider = guarded.capabilities.sessionIsolation;
  if (provider === null) throw new Error("the guard lost the capability");
  return { verdict: await provider.verifySessionIsolation(), asked };
}

describe("sessions beside unsandboxed live allocations", () => {
  test("none live: the backend's verdict stands", async () => {
    expect((await verdictWith([])).verdict).toEqual({ kind: "Verified", mechanism: "test" });
  });

  test("one live unsandboxed allocation makes the verdict Unverified, naming it", async () => {
    const { verdict } = await verdictWith(["a7"]);
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind === "Unverified") expect(verdict.message).toContain("(a7)");
  });

  test("many are named up to a bound, the rest counted as more", async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `a${i}`);
    const { verdict, asked } = await verdictWith(ids);
    expect(asked).toEqual([21]);
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind !== "Unverified") return;
    expect(verdict.message).toContain("a19 and more");
    expect(verdict.message).not.toContain("a20");
  });

  test("a backend that is not verified stays so, whatever is live", async () => {
    const unverified = fakeBackend({
      capabilities: {
        sessionIsolation: {
          verifySessionIsolation: async () => ({ kind: "Unverified", message: "no bwrap" }),
        },
      },
    });
    const guarded = guardedByLiveAllocations(unverified, () => []);
    const provider = guarded.capabilities.sessionIsolation;
    if (provider === null) throw new Error("the guard lost the capability");
    expect(await provider.verifySessionIsolation()).toEqual({
      kind: "Unverified",
      message: "no bwrap",
    });
  });
});
