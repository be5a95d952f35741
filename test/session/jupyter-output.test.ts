/**
 * Output between requests reaches the Jupyter side under the session it belongs to: only
 * from rank 0 of the session's current attempt (a superseded attempt's worker, or another
 * rank, says nothing to the session's clients).
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { getAllocation } from "../../src/adapters/store-sqlite/index.ts";
import { bindSessionStore } from "../../src/adapters/store-sqlite/stores/session-store.ts";
import { createJupyterService } from "../../src/core/session/jupyter-service.ts";
import { createStandingSignal } from "../../src/core/session/standing-signal.ts";
import { silentLog } from "../../src/lib/log.ts";
import type { CellEvent } from "../../src/wire/worker-protocol.ts";
import { fakeGateway } from "../support/fake-gateway.ts";
import {
  loseAttempt,
  newWorkload,
  startAttempt,
  type TestStore,
  testStore,
} from "../support/store-fixtures.ts";

let t: TestStore;
beforeEach(() => {
  t = testStore();
});
afterEach(() => {
  t.close();
});

const event: CellEvent = { type: "stream", name: "stdout", text: "tick\n" };

test("only rank 0 of the current attempt speaks for the session; unsubscribed, nobody hears", () => {
  const id = newWorkload(t.store);
  const old = startAttempt(t.store, id);
  loseAttempt(t.store, id, old);
  const current = startAttempt(t.store, id);
  const epochOf = (a: string) => getAllocation(t.store, a)?.epoch ?? -1;
  const jupyter = createJupyterService({
    store: bindSessionStore(t.store),
    gateway: fakeGateway(),
    log: silentLog,
    standingSignal: createStandingSignal(),
  });
  const heard: unknown[] = [];
  const stop = jupyter.onOutput((workloadId, cell, e) => heard.push({ workloadId, cell, e }));
  const at = (allocationId: string, rank: number, epoch = epochOf(allocationId)) => ({
    kind: "KernelOutput" as const,
    allocationId,
    epoch,
    rank,
    cell: "c1",
    event,
  });
  jupyter.kernelOutput(at(old, 0));
  jupyter.kernelOutput(at(current, 1));
  jupyter.kernelOutput(at(current, 0, epochOf(old)));
  jupyter.kernelOutput(at("no-such-allocation", 0, 0));
  expect(heard).toEqual([]);
  jupyter.kernelOutput(at(current, 0));
  expect(heard).toEqual([{ workloadId: id, cell: "c1", e: event }]);
  stop();
  jupyter.kernelOutput(at(current, 0));
  expect(heard).toHaveLength(1);
});
