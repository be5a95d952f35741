/**
 * A reconciler on an in-memory store and a simulated backend, with helpers to create
 * workloads and read them back. Shared by the reconciler's scenario and property tests.
 */

import { afterEach } from "bun:test";
import {
  createWorkload,
  getWorkload,
  listAllocations,
  listEvents,
  openDatabase,
  requestStop,
  type StoreDeps,
} from "../../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import {
  type Allocation,
  attemptMessage,
  type Reason,
  type Workload,
  type WorkloadKind,
} from "../../src/core/models.ts";
import type { SubmitRequest } from "../../src/core/ports/allocation-backend.ts";
import {
  type BarrierHooks,
  createReconciler,
  type Reconciler,
  type ReconcilerStore,
  type Timers,
} from "../../src/core/reconciler/create-reconciler.ts";
import type { ProfileBreakerOptions } from "../../src/core/reconciler/profile-breaker.ts";
import { type ManualClock, manualClock, systemTimers } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import {
  createSimulatedBackend,
  type SimulatedBackend,
  type SimulatedBackendOptions,
} from "./simulated-backend.ts";

/**
 * Prepares every attempt without touching the filesystem (a bench measures the reconciler,
 * not mkdir), each asking for `timeLimitSeconds` (null: none).
 */
export function inertPreparerWithLimit(timeLimitSeconds: number | null): AttemptPreparer {
  return {
    async prepare(workload, allocation) {
      return {
        kind: "Prepared",
        attempt: {
          launch: { kind: "COMMAND", command: workload.spec.command ?? ["true"], env: {} },
          allocationDir: `/nonexistent/${workload.id}/${allocation.id}`,
          workspaceDir: `/nonexistent/${workload.id}`,
          timeLimitSeconds,
        },
      };
    },
  };
}

/** The same, with no time limit. */
export const inertPreparer: AttemptPreparer = inertPreparerWithLimit(null);

/** Deterministic bytes (xorshift32), so a failing property replays exactly. */
export function seededBytes(seed = 0x9e3779b9): (n: number) => Uint8Array {
  let x = seed >>> 0 || 1;
  return (n) => {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      out[i] = x & 0xff;
    }
    return out;
  };
}

export interface HarnessOptions {
  readonly sim?: SimulatedBackendOptions;
  readonly preparer?: AttemptPreparer;
  readonly barrierHooks?: BarrierHooks;
  readonly timers?: Timers;
  /** Wrap the store (e.g. to inject crashes). */
  readonly wrapStore?: (store: ReconcilerStore) => ReconcilerStore;
  readonly maxCommandsInFlight?: number;
  /** The profile breaker's settings (default: the reconciler's). */
  readonly profileBreaker?: ProfileBreakerOptions;
}

export interface Harness {
  readonly clock: ManualClock;
  readonly deps: StoreDeps;
  readonly sim: SimulatedBackend;
  readonly log: ReturnType<typeof memoryLog>;
  reconciler: Reconciler;
  /** A fresh reconciler on the same store and backend: what a restarted daemon builds. */
  restart(): Reconciler;
  addWorkload(options?: {
    readonly maxAttempts?: number;
    readonly kind?: WorkloadKind;
    readonly command?: readonly string[];
  }): string;
  /**
   * What POST does: the workload created with its first attempt minted in one transaction
   * (ids from the reconciler), then handed to `admitted` unless `handOver` is false (a
   * process that died between the commit and the hand-over).
   */
  admit(options?: { readonly maxAttempts?: number; readonly handOver?: boolean }): {
    readonly id: string;
    readonly attempt: Allocation;
  };
  stop(id: string, reason?: Reason, message?: string): void;
  workload(id: string): Workload;
  allocations(id: string): readonly Allocation[];
  phases(id: string): readonly string[];
  tick(): ReturnType<Reconciler["reconcileOnce"]>;
  /** One tick that returns while the commands it started are still in flight (what `run` does). */
  tickNoWait(): ReturnType<Reconciler["reconcileOnce"]>;
  close(): void;
}

export function harness(options: HarnessOptions = {}): Harness {
  const clock = manualClock();
  const opened = openDatabase(":memory:");
  const deps: StoreDeps = { db: opened.db, clock };
  const sim = createSimulatedBackend({ clock, ...options.sim });
  const log = memoryLog();
  const random = seededBytes();
  let allocationSeq = 0;
  let workloadSeq = 0;
  const build = () =>
    createReconciler({
      timers: systemTimers,
      store: (options.wrapStore ?? ((s) => s))(bindReconcilerStore(deps)),
      backend: sim.backend,
      preparer: options.preparer ?? inertPreparer,
      clock,
      log,
      randomBytes: random,
      newAllocationId: () => `a${++allocationSeq}`,
      ...(options.barrierHooks ? { barrierHooks: options.barrierHooks } : {}),
      ...(options.timers ? { timers: options.timers } : {}),
      ...(options.maxCommandsInFlight !== undefined
        ? { maxCommandsInFlight: options.maxCommandsInFlight }
        : {}),
      ...(options.profileBreaker ? { profileBreaker: options.profileBreaker } : {}),
    });
  const h: Harness = {
    clock,
    deps,
    sim,
    log,
    reconciler: build(),
    restart() {
      h.reconciler = build();
      return h.reconciler;
    },
    addWorkload(o = {}) {
      const id = `w${++workloadSeq}`;
      createWorkload(deps, {
        id,
        kind: o.kind ?? "BATCH",
        name: id,
        profile: "default",
        spec: { command: [...(o.command ?? ["true"])] },
        maxAttempts: o.maxAttempts ?? 1,
        idempotencyKey: null,
        requestHash: null,
      });
      return id;
    },
    admit(o = {}) {
      const id = `w${++workloadSeq}`;
      const maxAttempts = o.maxAttempts ?? 1;
      const created = createWorkload(deps, {
        id,
        kind: "BATCH",
        name: id,
        profile: "default",
        spec: { command: ["true"] },
        maxAttempts,
        idempotencyKey: null,
        requestHash: null,
        firstAttempt: {
          ...h.reconciler.newAttemptIds(),
          message: attemptMessage(1, maxAttempts),
        },
      });
      if (created.kind !== "Created" || created.attempt === null) {
        throw new Error(`admit: ${created.kind}`);
      }
      if (o.handOver !== false) h.reconciler.admitted(created.workload, created.attempt);
      return { id, attempt: created.attempt };
    },
    stop(id, reason = "USER_CANCELLED", message = "cancelled by the user") {
      requestStop(deps, id, reason, message);
    },
    workload(id) {
      const w = getWorkload(deps, id);
      if (!w) throw new Error(`no workload ${id}`);
      return w;
    },
    allocations: (id) => listAllocations(deps, id),
    phases: (id) => listEvents(deps, id).map((e) => e.phase),
    tick() {
      clock.advance(1000);
      sim.step();
      return h.reconciler.reconcileOnce();
    },
    tickNoWait() {
      clock.advance(1000);
      sim.step();
      return h.reconciler.reconcileOnce({ waitForCommands: false });
    },
    close() {
      h.reconciler.close();
      opened.close();
    },
  };
  return h;
}

/**
 * `make(options)` for a test file: harnesses closed after each test, any submission a test
 * left held (`holdNextSubmit`) dropped first so no lane outlives its test.
 */
export function harnessPerTest(): (options?: HarnessOptions) => Harness {
  let open: Harness[] = [];
  afterEach(() => {
    for (const h of open) {
      h.sim.settleHeld("drop");
      h.close();
    }
    open = [];
  });
  return (options = {}) => {
    const h = harness(options);
    open.push(h);
    return h;
  };
}

/** Lets lane continuations (and what they wake) run. */
export async function settleLanes(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

/** Every submit request the backend is handed from now on, in order. */
export function recordSubmits(h: Harness): SubmitRequest[] {
  const seen: SubmitRequest[] = [];
  const inner = h.sim.backend.submit.bind(h.sim.backend);
  h.sim.backend.submit = async (requests) => {
    seen.push(...requests);
    return inner(requests);
  };
  return seen;
}
