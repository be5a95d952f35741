/**
 * An exec that never finishes (`while True: pass`) must not wedge the session: cells run one
 * at a time, so without an interrupt every later exec and the kernel probe wait behind it.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SESSION_ATTEMPT_FILE } from "../../src/adapters/spool/session-preparer.ts";
import { getAllocation, setCondition } from "../../src/adapters/store-sqlite/index.ts";
import { bindSessionStore } from "../../src/adapters/store-sqlite/stores/session-store.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { createSessionService } from "../../src/core/session/exec-service.ts";
import { systemTimers } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { fakeGateway } from "../support/fake-gateway.ts";
import { newWorkload, startAttempt, type TestStore, testStore } from "../support/store-fixtures.ts";

let t: TestStore;
afterEach(() => t?.close());

test("an exec that times out interrupts the cell it left running", async () => {
  t = testStore();
  const layout = stateLayout(join(t.dir, "state"));
  const gw = fakeGateway();
  const id = newWorkload(t.store);
  const allocationId = startAttempt(t.store, id);
  const dir = layout.allocationDir(id, allocationId);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, SESSION_ATTEMPT_FILE), JSON.stringify({ ranks: 1 }));
  const epoch = getAllocation(t.store, allocationId)?.epoch ?? -1;
  gw.connect(allocationId, epoch, 0);
  setCondition(t.store, id, { type: "READY", status: "TRUE", reason: "READY", message: "ok" });
  gw.kernel = () => "timeout";

  const service = createSessionService({
    timers: systemTimers,
    store: bindSessionStore(t.store),
    gateway: gw,
    log: silentLog,
  });
  const outcome = await service.exec(id, "while True: pass");

  expect(outcome.kind).toBe("NotReady");
  expect(gw.sent.map((s) => s.request.kind)).toEqual(["exec", "interrupt"]);
  expect(gw.sent[1]).toMatchObject({ allocationId, epoch, rank: 0 });
});
