import { join } from "node:path";
import {
  applyTransition,
  createWorkload,
  getAllocation,
  getWorkload,
  mintAttempt,
  openDatabase,
  type StoreDeps,
} from "../../src/adapters/store-sqlite/index.ts";
import {
  mintSubmissionToken,
  type WorkloadKind,
  type WorkloadSpec,
} from "../../src/core/models.ts";
import { type ManualClock, manualClock } from "../../src/lib/clock.ts";
import { makeTempDir, removeDir } from "./temp-dir.ts";

export interface TestStore {
  readonly dir: string;
  readonly clock: ManualClock;
  readonly store: StoreDeps;
  close(): void;
}

export function testStore(): TestStore {
  const dir = makeTempDir("o4s-session-");
  const clock = manualClock();
  const opened = openDatabase(join(dir, "openai4s.db"));
  return {
    dir,
    clock,
    store: { db: opened.db, clock },
    close() {
      opened.close();
      removeDir(dir);
    },
  };
}

let counter = 0;

export function newWorkload(
  store: StoreDeps,
  kind: WorkloadKind = "SESSION",
  spec: WorkloadSpec = {},
): string {
  counter += 1;
  const id = `w-${process.pid}-${counter}`;
  createWorkload(store, {
    id,
    kind,
    name: id,
    profile: "default",
    spec,
    maxAttempts: 2,
    idempotencyKey: null,
    requestHash: null,
  });
  return id;
}

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

/** Mints the next attempt and takes it to QUEUED, then RUNNING at the current time. */
export function startAttempt(
  store: StoreDeps,
  workloadId: string,
  options: { readonly running?: boolean } = {},
): string {
  const w = getWorkload(store, workloadId);
  if (!w) throw new Error("no workload");
  counter += 1;
  const allocationId = `a-${process.pid}-${counter}`;
  const minted = mintAttempt(store, {
    workloadId,
    allocationId,
    token: mintSubmissionToken(random),
    expectedEpoch: w.executionEpoch,
    message: "attempt",
  });
  if (minted.kind !== "Minted") throw new Error(minted.message);
  const epoch = minted.allocation.epoch;
  const now = store.clock.now();
  const queued = applyTransition(store, {
    allocation: {
      id: allocationId,
      expectedPhase: "SUBMITTING",
      phase: "QUEUED",
      reason: "SUBMITTED",
      message: null,
      submittedAt: now,
    },
    workload: {
      id: workloadId,
      expectedPhase: "SUBMITTING",
      expectedEpoch: epoch,
      phase: "QUEUED",
      reason: "SUBMITTED",
      message: null,
    },
  });
  if (!queued) throw new Error("could not queue");
  if (options.running !== false) markRunning(store, workloadId, allocationId);
  return allocationId;
}

export function markRunning(store: StoreDeps, workloadId: string, allocationId: string): void {
  const a = getAllocation(store, allocationId);
  if (!a) throw new Error("no allocation");
  const ok = applyTransition(store, {
    allocation: {
      id: allocationId,
      expectedPhase: "QUEUED",
      phase: "RUNNING",
      reason: "STARTED",
      message: null,
      startedAt: store.clock.now(),
    },
    workload: {
      id: workloadId,
      expectedPhase: "QUEUED",
      expectedEpoch: a.epoch,
      phase: "RUNNING",
      reason: "STARTED",
      message: null,
    },
  });
  if (!ok) throw new Error("could not mark running");
}

/** Ends the current attempt with a recoverable reason, the workload going back to PENDING. */
export function loseAttempt(store: StoreDeps, workloadId: string, allocationId: string): void {
  const a = getAllocation(store, allocationId);
  if (!a) throw new Error("no allocation");
  const ok = applyTransition(store, {
    allocation: {
      id: allocationId,
      expectedPhase: a.phase,
      phase: "FAILED",
      reason: "NODE_FAILURE",
      message: null,
      endedAt: store.clock.now(),
    },
    workload: {
      id: workloadId,
      expectedPhase: a.phase,
      expectedEpoch: a.epoch,
      phase: "PENDING",
      reason: "RETRYING",
      message: null,
    },
  });
  if (!ok) throw new Error("could not lose attempt");
}
