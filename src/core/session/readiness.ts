/**
 * Session readiness (INV-5): the conjunction of four conditions, and READY, whose reason
 * names the first one missing. A resource plane saying "running" only means a process
 * started somewhere: not that it connected back to us (WORKER_CONNECTED, every rank of the
 * CURRENT epoch), not that its files are where the user's data is (WORKSPACE_VISIBLE, every
 * worker reads back the marker the preparer wrote into the workspace), not that it can
 * compute (KERNEL_RESPONSIVE, `1+1` evaluates to `2`).
 *
 * Probing is not free and a kernel runs one exec at a time, so the two probes run once per
 * (allocation, epoch) and are then remembered while the workers stay connected; every pass
 * re-checks only the cheap facts (the allocation's phase, the gateway's connection table). A
 * rank that drops invalidates what was learnt: its replacement is probed again.
 *
 * Passes run every `intervalMs` and also at once when the gateway reports a connection
 * (`trigger`), so READY follows the last worker's connection by one pass, not one period.
 *
 * Over 400 lines because the pass, its memo of what it wrote and the standing notification
 * the Jupyter hub waits on (onStandingChanged) share one closure over the live sessions.
 */

import type { Clock, Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { type Allocation, type ConditionType, isTerminal, type Workload } from "../models.ts";
import type { SessionAttempts } from "../ports/session-attempts.ts";
import type { SessionStore } from "../ports/session-store.ts";
import type { WorkerGateway } from "../ports/worker-gateway.ts";
import { createAttemptRanks } from "./attempt-ranks.ts";
import {
  type ConditionValue,
  endedConditions,
  KERNEL_DIED,
  KERNEL_RESTARTED,
  type ProbeResult,
  probedCondition,
  readyCondition,
} from "./readiness-conditions.ts";
import { createReadinessProbes } from "./readiness-probes.ts";
import {
  allocationRunningCondition,
  notChecked,
  unprobed,
  workerConnectedCondition,
  workerMissing,
} from "./readiness-values.ts";

export type SessionGateway = Pick<WorkerGateway, "connected" | "connection" | "request">;

export interface SessionReadinessOptions {
  readonly store: SessionStore;
  readonly gateway: SessionGateway;
  /** The attempt records and workspace markers the preparer wrote. */
  readonly attempts: SessionAttempts;
  readonly clock: Clock;
  readonly log: Log;
  /** Period of `run`. Default 200 ms: READY within a second of the allocation running. */
  readonly intervalMs?: number;
  /** What `run` waits on between passes (tests: a manual timeline), from the composition. */
  readonly timers: Timers;
  /** After a failed probe, the next try waits this long. Default 1 s. */
  readonly probeRetryMs?: number;
  /** Per probe_workspace request. Default 5 s. */
  readonly probeTimeoutMs?: number;
  /** For the `1+1` probe, which may include the kernel's start. Default 15 s. */
  readonly kernelTimeoutMs?: number;
  /** The most ranks an attempt of this workload can have (its profile's nodes). */
  readonly maxRanksOf?: (workload: Workload) => number;
  /**
   * A session became READY for the first time this process saw (it saw it not READY
   * before): the time-to-READY histogram. Not after a restart for a session already READY.
   */
  readonly onReady?: (workload: Workload, readyAt: number) => void;
  /**
   * What a session's kernel standing is made of changed (a condition written, its phase,
   * its stop request, its current allocation): the Jupyter hub's waiters are told at once
   * (standing-signal.ts) instead of looking again on a timer.
   */
  readonly onStandingChanged?: (workloadId: string) => void;
}

export interface SessionReadiness {
  /** One pass over every SESSION workload; resolves when its conditions are written. */
  evaluateOnce(): Promise<void>;
  /** Runs passes until the signal aborts. */
  run(signal: AbortSignal): Promise<void>;
  /** Asks for a pass now (e.g. a worker connected); coalesces with one already due. */
  trigger(): void;
}

interface AttemptKnowledge {
  workspace: ProbeResult | null;
  kernel: ProbeResult | null;
  /** The probes running now, if any: at most one round per attempt at a time. */
  probing: Promise<void> | null;
  /** After a failed round, not before this (clock ms): a broken worker is not hammered. */
  retryAt: number;
}

const attemptKey = (a: Allocation) => `${a.epoch}\u0000${a.id}`;

/**
 * For a daemon running without the worker gateway: no worker can connect and no readiness
 * loop runs, so the conditions a previous run wrote would go on saying READY (measured: a
 * session FAILED an hour later still showed READY TRUE). Every SESSION with a condition that
 * is not FALSE is rewritten once, at start: ended ones as ended, live ones with nothing TRUE,
 * because nothing observes them. Being not FALSE, they are swept again by the readiness
 * loop of the next run that has a gateway.
 */
export function markSessionsUnobserved(store: SessionStore, why: string): void {
  let cursor: { readonly createdAt: number; readonly id: string } | null = null;
  do {
    const page = store.listSessions({ limit: 200, ...(cursor ? { cursor } : {}) });
    for (const workload of page.items) {
      if (store.listConditions(workload.id).every((c) => c.status === "FALSE")) continue;
      const message = `not observed: ${why}`;
      const four: readonly ConditionValue[] = isTerminal(workload.phase)
        ? endedConditions(workload).filter((c) => c.type !== "READY")
        : [
            {
              type: "ALLOCATION_RUNNING",
              status: "UNKNOWN",
              reason: "ALLOCATION_NOT_RUNNING",
              message,
            },
            { type: "WORKER_CONNECTED", status: "FALSE", reason: "WORKER_MISSING", message },
            {
              type: "WORKSPACE_VISIBLE",
              status: "UNKNOWN",
              reason: "WORKSPACE_NOT_VISIBLE",
              message,
            },
            {
              type: "KERNEL_RESPONSIVE",
              status: "UNKNOWN",
              reason: "KERNEL_UNRESPONSIVE",
              message,
            },
          ];
      for (const c of [...four, readyCondition(four)]) store.setCondition(workload.id, c);
    }
    cursor = page.next;
  } while (cursor !== null);
}

export function createSessionReadiness(options: SessionReadinessOptions): SessionReadiness {
  const { store, gateway, attempts, log } = options;
  const intervalMs = options.intervalMs ?? 200;
  const { timers } = options;
  const probeTimeoutMs = options.probeTimeoutMs ?? 5000;
  const kernelTimeoutMs = options.kernelTimeoutMs ?? 15_000;
  const probeRetryMs = options.probeRetryMs ?? 1000;
  const probes = createReadinessProbes({ gateway, attempts, probeTimeoutMs, kernelTimeoutMs });
  const { clock } = options;

  /** What the probes learnt, per attempt, while all its workers stayed connected. */
  const knowledge = new Map<string, AttemptKnowledge>();
  const ranksOf = createAttemptRanks(attempts, log, options.maxRanksOf);
  /** The last conditions written per workload, so an unchanged pass writes nothing. */
  const written = new Map<string, Map<ConditionType, string>>();
  /** Sessions whose first READY was reported to `onReady` (forgotten when they end). */
  const reportedReady = new Set<string>();
  let sweptEnded = false;
  let wake: (() => void) | null = null;
  const probesInFlight = new Set<Promise<void>>();
  let closed = false;

  function write(workloadId: string, values: readonly ConditionValue[]): void {
    let mine = written.get(workloadId);
    if (!mine) {
      mine = new Map();
      written.set(workloadId, mine);
    }
    let wrote = false;
    for (const v of values) {
      const fingerprint = `${v.status}\u0000${v.reason}\u0000${v.message}`;
      if (mine.get(v.type) === fingerprint) continue;
      store.setCondition(workloadId, v);
      mine.set(v.type, fingerprint);
      wrote = true;
    }
    if (wrote) options.onStandingChanged?.(workloadId);
  }

  /** The rest of what a kernel's standing reads, per live session, as last seen by a pass. */
  const shapes = new Map<string, string>();
  function noteShape(workload: Workload, current: Allocation | null): void {
    const shape = `${workload.phase}\u0000${workload.desired.kind}\u0000${current?.id}\u0000${current?.epoch}\u0000${current?.phase}`;
    if (shapes.get(workload.id) === shape) return;
    shapes.set(workload.id, shape);
    options.onStandingChanged?.(workload.id);
  }

  /** Probes what is not yet known, both at once; a pass follows as soon as they answer. */
  function startProbes(known: AttemptKnowledge, workload: Workload, a: Allocation, ranks: number) {
    const round = (async () => {
      const [workspace, kernel] = await Promise.all([
        known.workspace?.ok ? known.workspace : probes.workspace(workload, a, ranks),
        known.kernel?.ok ? known.kernel : probes.kernel(a),
      ]);
      known.workspace = workspace;
      known.kernel = kernel;
      if (!workspace.ok || !kernel.ok) known.retryAt = clock.now() + probeRetryMs;
    })()
      .catch((error) => {
        known.retryAt = clock.now() + probeRetryMs;
        log.error("session readiness probe failed", {
          workloadId: workload.id,
          error: String(error),
        });
      })
      .finally(() => {
        known.probing = null;
        probesInFlight.delete(round);
        trigger();
      });
    known.probing = round;
    probesInFlight.add(round);
  }

  function evaluate(workload: Workload, a: Allocation | null): readonly ConditionValue[] {
    const allocationRunning = allocationRunningCondition(workload, a);
    const ranks = a ? ranksOf(workload, a) : null;
    if (a === null || ranks === null) {
      const why = a === null ? "no allocation yet" : "the attempt is not prepared yet";
      return unprobed(allocationRunning, workerMissing(why), why);
    }

    const connected = gateway.connected(a.id, a.epoch);
    const missing = Array.from({ length: ranks }, (_, r) => r).filter((r) => !connected.has(r));
    const k = attemptKey(a);
    const workerConnected = workerConnectedCondition(a, ranks, missing);
    if (missing.length > 0) {
      // What a previous connection proved says nothing about its replacement.
      knowledge.delete(k);
      return unprobed(allocationRunning, workerConnected, "waiting for every worker to connect");
    }

    let known = knowledge.get(k);
    if (!known) {
      known = { workspace: null, kernel: null, probing: null, retryAt: 0 };
      knowledge.set(k, known);
    }
    // Probe only an attempt that is wanted and not being torn down: the barrier may be
    // stopping these very workers. Probes run beside the passes, never inside one: a kernel
    // that takes a second to start must not delay noticing that the allocation runs.
    const wanted = workload.desired.kind === "RUN" && a.phase !== "STOPPING";
    const complete = known.workspace?.ok === true && known.kernel?.ok === true;
    if (wanted && !complete && known.probing === null && clock.now() >= known.retryAt) {
      startProbes(known, workload, a, ranks);
    }
    const workspace: ConditionValue = known.workspace
      ? probedCondition("WORKSPACE_VISIBLE", known.workspace)
      : notChecked("WORKSPACE_VISIBLE", wanted ? "probing the workers" : "the session is stopping");
    const died = deadKernels(a, ranks);
    const replaced = known.kernel?.ok ? replacedKernels(a, ranks) : null;
    const kernel: ConditionValue =
      died !== null
        ? { type: "KERNEL_RESPONSIVE", status: "FALSE", reason: KERNEL_DIED, message: died }
        : replaced !== null
          ? {
              type: "KERNEL_RESPONSIVE",
              status: "TRUE",
              reason: KERNEL_RESTARTED,
              message: replaced,
            }
          : known.kernel
            ? probedCondition("KERNEL_RESPONSIVE", known.kernel)
            : notChecked(
                "KERNEL_RESPONSIVE",
                wanted ? "probing the workers" : "the session is stopping",
              );
    const four = [allocationRunning, workerConnected, workspace, kernel];
    return [...four, readyCondition(four)];
  }

  /**
   * What the workers said of their kernels: they watch the process and report a death at
   * once, so this turns FALSE within a pass of `os._exit`, not at the next probe.
   */
  function deadKernels(a: Allocation, ranks: number): string | null {
    const deaths: string[] = [];
    for (let rank = 0; rank < ranks; rank++) {
      const status = gateway.connection(a.id, a.epoch, rank)?.kernel;
      if (status?.state === "dead") {
        deaths.push(ranks === 1 ? status.message : `rank ${rank}: ${status.message}`);
      }
    }
    return deaths.length > 0 ? deaths.join("; ") : null;
  }

  /** What the workers said of kernels that replaced one that is gone (see KERNEL_RESTARTED). */
  function replacedKernels(a: Allocation, ranks: number): string | null {
    const replacements: string[] = [];
    for (let rank = 0; rank < ranks; rank++) {
      const status = gateway.connection(a.id, a.epoch, rank)?.kernel;
      if (status?.state === "running" && status.replaced !== undefined) {
        replacements.push(ranks === 1 ? status.message : `rank ${rank}: ${status.message}`);
      }
    }
    return replacements.length > 0 ? replacements.join("; ") : null;
  }

  function noteReady(workload: Workload, before: string | undefined): void {
    const after = written.get(workload.id)?.get("READY");
    if (before === undefined || before === after || !after?.startsWith("TRUE\u0000")) return;
    if (reportedReady.has(workload.id)) return;
    reportedReady.add(workload.id);
    options.onReady?.(workload, clock.now());
  }

  function pass(): void {
    if (!sweptEnded) {
      // Sessions that ended while no readiness loop was watching (a daemon restart).
      for (const id of store.listEndedSessionsWithOpenConditions()) {
        write(id, endedConditions(store.getWorkload(id)));
      }
      sweptEnded = true;
    }
    const view = store.loadLiveView().filter((item) => item.workload.kind === "SESSION");
    const live = new Set(view.map((item) => item.workload.id));
    // Sessions seen live before and gone from the view now have ended.
    for (const id of [...written.keys()]) {
      if (live.has(id)) continue;
      write(id, endedConditions(store.getWorkload(id)));
      written.delete(id);
      reportedReady.delete(id);
      if (shapes.delete(id)) options.onStandingChanged?.(id);
    }
    const liveAttempts = new Set<string>();
    for (const { workload, current } of view) {
      if (current) liveAttempts.add(attemptKey(current));
      try {
        const before = written.get(workload.id)?.get("READY");
        write(workload.id, evaluate(workload, current));
        noteReady(workload, before);
        noteShape(workload, current);
      } catch (error) {
        // One session's broken state must not hold the others' readiness back.
        log.error("session readiness evaluation failed", {
          workloadId: workload.id,
          error: String(error),
        });
      }
    }
    for (const k of knowledge.keys()) if (!liveAttempts.has(k)) knowledge.delete(k);
  }

  /**
   * One pass, then waits for the probes it started and passes again until nothing is in
   * flight: what a caller (a test, a CLI) that wants "the conditions now" needs. The loop in
   * `run` does not wait: probe completions trigger it instead.
   */
  async function evaluateOnce(): Promise<void> {
    pass();
    while (probesInFlight.size > 0) {
      await Promise.all([...probesInFlight]);
      pass();
    }
  }

  function trigger(): void {
    // After `run` ended (daemon shutdown), a late probe answer must not touch a store that
    // is about to close.
    if (closed) return;
    if (wake) {
      wake();
      return;
    }
    try {
      pass();
    } catch (error) {
      log.error("session readiness pass failed", { error: String(error) });
    }
  }

  return {
    evaluateOnce,
    trigger,
    async run(signal) {
      if (signal.aborted) closed = true;
      signal.addEventListener(
        "abort",
        () => {
          closed = true;
        },
        { once: true },
      );
      while (!signal.aborted) {
        try {
          pass();
        } catch (error) {
          log.error("session readiness pass failed", { error: String(error) });
        }
        await new Promise<void>((resolve) => {
          const cancel = timers.after(intervalMs, done);
          function done() {
            cancel();
            signal.removeEventListener("abort", done);
            wake = null;
            resolve();
          }
          wake = done;
          signal.addEventListener("abort", done, { once: true });
        });
      }
    },
  };
}
