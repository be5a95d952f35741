/**
 * One token, one submission: an attempt admitted with its workload (POST) is handed to the
 * backend on the event loop's next turn, and a tick that looked at the store in between saw
 * it too (fresh, in no lane yet). Each then started its own submission of the same token,
 * lookup-free while fresh: on the real cluster (a 4 MiB state dir filled while submissions
 * arrived, issue 33) sacct showed one token as two jobs.
 */
import { expect, test } from "bun:test";
import { harnessPerTest, recordSubmits, settleLanes } from "../support/reconciler-harness.ts";

const make = harnessPerTest();

test("a tick that sees an admitted attempt before its turn does not submit it a second time", async () => {
  const h = make();
  // Something for the tick to read, so it awaits the backend between its look and its steps.
  h.addWorkload();
  await h.tick();
  const seen = recordSubmits(h);
  // The first submission's answer takes its time, as sbatch's does.
  h.sim.holdNextSubmit();
  const { id, attempt } = h.admit();
  // In the same turn: the tick looks (the attempt fresh, not yet handed over).
  const tick = h.tickNoWait();
  await tick;
  await settleLanes();
  h.sim.settleHeld("land");
  await settleLanes();
  const tokens = seen.map((r) => r.token).filter((t) => t === attempt.token);
  expect(tokens.length).toBe(1);
  expect(h.sim.freshTokenViolations).toEqual([]);
  expect(h.allocations(id).map((a) => a.phase)).toEqual(["QUEUED"]);
});
