/**
 * A session whose worker reported its environment unusable on its node ends
 * ENVIRONMENT_UNAVAILABLE with the worker's words, not "exit code 1" (issue 30). The
 * decorator's half, pure: both paths an ending reaches the reconciler by (observe, the change
 * feed) are rewritten, only a FAILED/NONZERO_EXIT of an allocation with a report is, the
 * first report is the one kept, and the notes are bounded.
 */
import { describe, expect, test } from "bun:test";
import type {
  AllocationObservation,
  ObservationCursor,
  ObservationTarget,
} from "../../src/core/ports/allocation-backend.ts";
import {
  createEnvironmentEndings,
  withEnvironmentEndings,
} from "../../src/core/session/environment-endings.ts";
import { fakeBackend } from "../support/fake-backend.ts";

function ended(reason: string, phase = "FAILED"): AllocationObservation {
  return {
    kind: "Observed",
    phase,
    reason,
    message: `${phase}: exit code 1`,
    exitCode: 1,
    startedAt: 1,
    endedAt: 2,
  } as AllocationObservation;
}

const REPORT = 'environment "torch": /opt/envs/torch is not on node n3';

/** Allocation ids: each has a report except "silent". */
const ENDINGS: ReadonlyMap<string, AllocationObservation> = new Map([
  ["failed", ended("NONZERO_EXIT")],
  ["silent", ended("NONZERO_EXIT")],
  ["cancelled", ended("USER_CANCELLED", "CANCELLED")],
  ["node-failure", ended("NODE_FAILURE")],
  ["running", { kind: "Observed", phase: "RUNNING", reason: "STARTED" } as AllocationObservation],
  ["unknown", { kind: "Indeterminate", message: "accounting lags" }],
]);

function decorated() {
  const endings = createEnvironmentEndings();
  for (const id of ENDINGS.keys()) if (id !== "silent") endings.note(id, REPORT);
  return withEnvironmentEndings(
    fakeBackend({
      observe: async () => ({ kind: "Observed", observations: ENDINGS }),
      capabilities: {
        changes: {
          observeChanges: async () => ({
            kind: "Observed",
            observations: ENDINGS,
            changes: [...ENDINGS].map(([allocationId, observation]) => ({
              target: { allocationId } as ObservationTarget,
              observation,
            })),
            cursor: "c" as ObservationCursor,
          }),
        },
      },
    }),
    endings,
  );
}

const EXPECTED = new Map<string, AllocationObservation | undefined>([
  [
    "failed",
    {
      ...ended("NONZERO_EXIT"),
      reason: "ENVIRONMENT_UNAVAILABLE",
      message: REPORT,
    } as AllocationObservation,
  ],
  ["silent", ended("NONZERO_EXIT")],
  // Not the worker's doing: a cancel, a node that died (retried), a live or unknown state.
  ["cancelled", ended("USER_CANCELLED", "CANCELLED")],
  ["node-failure", ended("NODE_FAILURE")],
  ["running", ENDINGS.get("running")],
  ["unknown", ENDINGS.get("unknown")],
]);

describe("the end of an allocation whose worker reported its environment unusable", () => {
  test("observe: a FAILED/NONZERO_EXIT with a report carries it, nothing else changes", async () => {
    const result = await decorated().observe([]);
    if (result.kind !== "Observed") throw new Error("not observed");
    expect(new Map<string, AllocationObservation | undefined>(result.observations)).toEqual(
      EXPECTED,
    );
  });

  test("the change feed likewise, its observations and its changes", async () => {
    const feed = decorated().capabilities.changes;
    if (feed === null) throw new Error("the change feed was dropped");
    const result = await feed.observeChanges(null, []);
    if (result.kind !== "Observed") throw new Error("not observed");
    expect(new Map<string, AllocationObservation | undefined>(result.observations)).toEqual(
      EXPECTED,
    );
    expect(
      new Map<string, AllocationObservation | undefined>(
        result.changes.map((c) => [c.target.allocationId, c.observation]),
      ),
    ).toEqual(EXPECTED);
  });

  test("the first report of an allocation is kept; the oldest go first past the bound", () => {
    const endings = createEnvironmentEndings(2);
    endings.note("a", "first");
    endings.note("a", "second");
    expect(endings.noteOf("a")).toBe("first");
    endings.note("b", "b's");
    endings.note("c", "c's");
    expect([endings.noteOf("a"), endings.noteOf("b"), endings.noteOf("c")]).toEqual([
      null,
      "b's",
      "c's",
    ]);
  });
});
