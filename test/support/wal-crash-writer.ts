/**
 * A writer to be killed mid-way (test/store/wal-checkpointer.test.ts): opens the store as
 * the daemon does, with the checkpointer thread copying the WAL every few milliseconds, and
 * commits workloads in small durable batches, printing `committed N` after each commit and
 * `runs K` (checkpoints so far). Never ends on its own.
 *
 * Usage: `bun test/support/wal-crash-writer.ts DB_PATH`
 */

import {
  createWorkload,
  openDatabase,
  startWalCheckpointer,
} from "../../src/adapters/store-sqlite/index.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";

const path = process.argv[2];
if (path === undefined) throw new Error("usage: wal-crash-writer.ts DB_PATH");
const opened = openDatabase(path);
const checkpointer = startWalCheckpointer(opened.sqlite, {
  path,
  log: silentLog,
  intervalMs: 2,
});
const deps = { db: opened.db, clock: systemClock };
const BATCH = 20;
let committed = 0;
for (;;) {
  deps.db.transaction(() => {
    for (let i = 0; i < BATCH; i++) {
      const id = `w${String(committed + i + 1).padStart(7, "0")}`;
      createWorkload(deps, {
        id,
        kind: "BATCH",
        name: id,
        profile: "default",
        spec: { command: ["true"], env: { PAD: "x".repeat(512) } },
        maxAttempts: 1,
        idempotencyKey: null,
        requestHash: null,
      });
    }
  });
  committed += BATCH;
  process.stdout.write(`committed ${committed}\nruns ${checkpointer.stats().runs}\n`);
  // Let the checkpointer's reports in, as the daemon's event loop does between writes.
  await new Promise((resolve) => setImmediate(resolve));
}
