/**
 * A cluster job that failed while the spool was full is SPOOL_FULL, not NONZERO_EXIT (issue
 * 18: only the local supervisor named it). The decorator's half, pure: every path an ending
 * reaches the reconciler by (observe, the change feed, findByToken) is rewritten, only a
 * FAILED/NONZERO_EXIT is, only while the spool is full, and the spool is read once per
 * answer. Seen failing with the decorator left out of each path.
 */
import { describe, expect, test } from "bun:test";
import type { SubmissionToken } from "../../src/core/models.ts";
import type {
  AllocationObservation,
  ObservationCursor,
  ObservationTarget,
} from "../../src/core/ports/allocation-backend.ts";
import { withSpoolFullEndings } from "../../src/core/spool-full-endings.ts";
import { FULL_BELOW_BYTES, formatBytes, spoolFullness } from "../../src/lib/spool-space.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const MIB = 1024 * 1024;

function ended(reason: string, phase = "FAILED", exitCode = 1): AllocationObservation {
  return {
    kind: "Observed",
    phase,
    reason,
    message: `job 42 ended ${phase}, exit code ${exitCode}`,
    exitCode,
    startedAt: 1,
    endedAt: 2,
  } as AllocationObservation;
}

const ENDINGS: ReadonlyMap<string, AllocationObservation> = new Map([
  ["failed", ended("NONZERO_EXIT")],
  ["completed", ended("EXITED_ZERO", "COMPLETED", 0)],
  ["oom", ended("OUT_OF_MEMORY")],
  ["running", { kind: "Observed", phase: "RUNNING", reason: "STARTED" } as AllocationObservation],
  ["unknown", { kind: "Indeterminate", message: "accounting lags" }],
]);

/** A spool with `freeBytes` free of 8 MiB; `reads` counts the statfs calls. */
function spoolWith(freeBytes: number | null) {
  const counter = { reads: 0 };
  const spool = {
    fullBelowBytes: FULL_BELOW_BYTES,
    read() {
      counter.reads += 1;
      return freeBytes === null ? null : { freeBytes, totalBytes: 8 * MIB };
    },
    format: formatBytes,
  };
  return { spool, counter };
}

const TARGETS: readonly ObservationTarget[] = [];

function decorated(freeBytes: number | null) {
  const { spool, counter } = spoolWith(freeBytes);
  const backend = withSpoolFullEndings(
    fakeBackend({
      observe: async () => ({ kind: "Observed", observations: ENDINGS }),
      capabilities: {
        changes: {
          observeChanges: async () => ({
            kind: "Observed",
            observations: ENDINGS,
            changes: [...ENDINGS.values()].map((observation) => ({
              target: { allocationId: "x" } as ObservationTarget,
              observation,
            })),
            cursor: "c" as ObservationCursor,
          }),
        },
      },
      findByToken: async (tokens) =>
        new Map(
          tokens.map((t) => [
            t,
            { kind: "Found", handle: "42", observation: ended("NONZERO_EXIT") },
          ]),
        ) as never,
    }),
    spool,
  );
  return { backend, counter };
}

function reasons(
  observations: ReadonlyMap<string, AllocationObservation>,
): Record<string, string | null> {
  return Object.fromEntries(
    [...observations].map(([k, o]) => [k, o.kind === "Observed" ? o.reason : o.kind]),
  );
}

const UNTOUCHED = {
  completed: "EXITED_ZERO",
  oom: "OUT_OF_MEMORY",
  running: "STARTED",
  unknown: "Indeterminate",
};

describe("a failure on a full spool is named SPOOL_FULL", () => {
  test("observe: only the FAILED/NONZERO_EXIT, with the figures after the backend's words", async () => {
    const { backend, counter } = decorated(64 * 1024);
    const result = await backend.observe(TARGETS);
    if (result.kind !== "Observed") throw new Error("not observed");
    expect(reasons(result.observations)).toEqual({ failed: "SPOOL_FULL", ...UNTOUCHED });
    const failed = result.observations.get("failed");
    expect(failed?.kind === "Observed" && failed.message).toBe(
      "job 42 ended FAILED, exit code 1; the spool's filesystem was full when its end was seen (64.0 KiB free of 8.0 MiB): it could not write its files or logs",
    );
    expect(failed?.kind === "Observed" && failed.phase).toBe("FAILED");
    expect(counter.reads).toBe(1);
  });

  test("the change feed: its observations and its changes", async () => {
    const { backend } = decorated(0);
    const changes = backend.capabilities.changes;
    expect(changes).not.toBeNull();
    if (changes === null) return;
    const result = await changes.observeChanges(null, TARGETS);
    if (result.kind !== "Observed") throw new Error("not observed");
    expect(reasons(result.observations)["failed"]).toBe("SPOOL_FULL");
    expect(
      result.changes.map((c) => (c.observation.kind === "Observed" ? c.observation.reason : "")),
    ).toEqual(["SPOOL_FULL", "EXITED_ZERO", "OUT_OF_MEMORY", "STARTED", ""]);
  });

  test("findByToken: an ending found by its token", async () => {
    const { backend } = decorated(0);
    const found = await backend.findByToken(["t1" as SubmissionToken]);
    const r = found.get("t1" as SubmissionToken);
    expect(r?.kind === "Found" && r.observation.kind === "Observed" && r.observation.reason).toBe(
      "SPOOL_FULL",
    );
  });

  test("room on the spool, or a spool that cannot be read: the failure stays the program's", async () => {
    for (const free of [FULL_BELOW_BYTES, 4 * MIB, null]) {
      const { backend } = decorated(free);
      const result = await backend.observe(TARGETS);
      if (result.kind !== "Observed") throw new Error("not observed");
      expect(reasons(result.observations)).toEqual({ failed: "NONZERO_EXIT", ...UNTOUCHED });
    }
  });

  test("no failure in the answer: the spool is not read", async () => {
    const { spool, counter } = spoolWith(0);
    const backend = withSpoolFullEndings(
      fakeBackend({
        observe: async () => ({
          kind: "Observed",
          observations: new Map([["c", ended("EXITED_ZERO", "COMPLETED", 0)]]),
        }),
      }),
      spool,
    );
    await backend.observe(TARGETS);
    expect(counter.reads).toBe(0);
    // A backend without a change feed is not given one.
    expect(backend.capabilities.changes).toBeNull();
  });

  test("the real reader: figures of a directory, null for one that does not exist", () => {
    expect(spoolFullness("/").read()?.totalBytes).toBeGreaterThan(0);
    expect(spoolFullness("/nonexistent/o4s-spool").read()).toBeNull();
  });
});
