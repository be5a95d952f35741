/**
 * The local backend's change feed (`observeChanges`) with real processes: a job that ends
 * while nobody targets it is reported once, a restart expires the cursor, and an unreadable
 * jobs directory is Unavailable and keeps it.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { renameSync } from "node:fs";
import { jobsRoot } from "../../src/adapters/backend-local/records.ts";
import type {
  ObservationCursor,
  ObserveChangesResult,
} from "../../src/core/ports/allocation-backend.ts";
import { eventually } from "../support/eventually.ts";
import {
  cleanUpStates,
  makeBackend,
  makeRequest,
  makeState,
  phaseOf,
  targetOf,
} from "../support/local-backend.ts";

setDefaultTimeout(60_000);
afterEach(() => cleanUpStates());

function observed(result: ObserveChangesResult) {
  if (result.kind !== "Observed") throw new Error(`expected Observed: ${JSON.stringify(result)}`);
  return result;
}

describe("local backend: changes since a cursor", () => {
  test("a job that ends untargeted is reported once; a restart expires the cursor", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const quick = makeRequest(state, ["sh", "-c", "read line < /dev/null; exit 3"]);
    const slow = makeRequest(state, ["sleep", "30"]);
    const submitted = await backend.submit([quick, slow]);
    expect([...submitted.values()].map((r) => r.kind)).toEqual(["Created", "Created"]);
    let cursor: ObservationCursor = observed(
      await backend.capabilities.changes.observeChanges(null, [targetOf(quick), targetOf(slow)]),
    ).cursor;
    const ended = await eventually(
      async () => {
        const next = observed(await backend.capabilities.changes.observeChanges(cursor, []));
        cursor = next.cursor;
        const change = next.changes.find(
          (c) =>
            c.target.allocationId === quick.allocationId && phaseOf(c.observation) === "FAILED",
        );
        return change ?? null;
      },
      { what: "the quick job's ending among the changes" },
    );
    expect(ended.observation).toMatchObject({ phase: "FAILED", exitCode: 3 });
    const after = observed(await backend.capabilities.changes.observeChanges(cursor, []));
    expect(after.changes.filter((c) => c.target.allocationId === quick.allocationId)).toEqual([]);

    const restarted = makeBackend(state);
    expect(await restarted.capabilities.changes.observeChanges(after.cursor, [])).toEqual({
      kind: "CursorExpired",
    });
    await backend.cancel([targetOf(slow)]);
  });

  test("job records out of reach: Unavailable, and the cursor still holds", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const first = observed(await backend.capabilities.changes.observeChanges(null, []));
    const jobs = jobsRoot(state.backendDir);
    renameSync(jobs, `${jobs}.away`);
    try {
      expect((await backend.capabilities.changes.observeChanges(first.cursor, [])).kind).toBe(
        "Unavailable",
      );
    } finally {
      renameSync(`${jobs}.away`, jobs);
    }
    expect((await backend.capabilities.changes.observeChanges(first.cursor, [])).kind).toBe(
      "Observed",
    );
  });
});
