/**
 * A simulated AllocationBackend with fault injection, for tests and benchmarks of anything
 * that drives the backend port (the reconciler first of all). It keeps the "truth" a test
 * asserts against: every job ever created, with its token, phase and history.
 *
 * What it can be made to do:
 *  - answer submit Unknown after really creating the job, or without creating it, or Reject;
 *  - be unavailable (every call answers Unavailable/Unknown; pendingTerminalFacts throws);
 *  - throw from any operation (broken infrastructure);
 *  - lose jobs (observe says LOST, findByToken says Absent), finish them, start them;
 *  - lag on cancel: a cancel takes effect only after N `step()`s;
 *  - answer Indeterminate for chosen jobs (a lagging accounting record).
 *
 * By default `submit` honours the port's contract and looks the token up first (a retry
 * returns Existing). `lookupBeforeSubmit: false` models a backend that does not, so a test
 * can prove the caller alone never puts two jobs behind one token.
 */

import {
  type ExternalHandle,
  externalHandle,
  isTerminal,
  type Phase,
  type Reason,
  type ResourceProfile,
  type SubmissionToken,
} from "../../src/core/models.ts";
import {
  type AllocationBackend,
  type AllocationObservation,
  type BackendDiagnostics,
  type CancelResult,
  type FindResult,
  NO_CAPABILITIES,
  type ObservationCursor,
  type ObservationTarget,
  type ObserveChangesResult,
  type ObservedChange,
  type ObserveResult,
  type SubmitRequest,
  type SubmitResult,
  type TerminalAllocationAcknowledger,
  type TerminalFact,
} from "../../src/core/ports/allocation-backend.ts";
import type { Clock } from "../../src/lib/clock.ts";
import type { OptionalCapabilities } from "./fake-backend.ts";

export type SubmitFault = "UNKNOWN_AFTER_CREATE" | "UNKNOWN_WITHOUT_CREATE" | "REJECT";

export const SIM_OPERATIONS = [
  "submit",
  "observe",
  "cancel",
  "findByToken",
  "diagnostics",
  "pendingTerminalFacts",
  "acknowledgeTerminal",
] as const;
export type SimOperation = (typeof SIM_OPERATIONS)[number];

export type LivePhase = "QUEUED" | "RUNNING" | "STOPPING";

export interface SimJob {
  readonly handle: ExternalHandle;
  readonly token: SubmissionToken;
  readonly request: SubmitRequest;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly exitCode: number | null;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  /** Step at which a requested cancel takes effect; null when none was requested. */
  readonly cancelDueStep: number | null;
  readonly factAcknowledged: boolean;
}

/** One call as the backend saw it: what was asked and what it answered. */
export type SimCall =
  | { readonly op: "submit"; readonly answers: readonly SubmitResult[] }
  | { readonly op: "findByToken"; readonly answers: readonly [SubmissionToken, FindResult][] }
  | {
      readonly op: "observe";
      readonly targets: readonly ObservationTarget[];
      readonly result: ObserveResult["kind"];
    }
  | {
      readonly op: "cancel";
      readonly targets: readonly ObservationTarget[];
      readonly available: boolean;
    }
  | { readonly op: "pendingTerminalFacts" | "acknowledgeTerminal" | "diagnostics" };

export interface SimulatedBackendOptions {
  readonly name?: string;
  /** Default true: submit first looks the token up (the port's contract). */
  readonly lookupBeforeSubmit?: boolean;
  /** Default false. When true, the record's `terminalFacts` is the backend's. */
  readonly acknowledger?: boolean;
  readonly profiles?: readonly ResourceProfile[];
  readonly clock?: Clock;
  /** Called for every submit request before the backend acts on it. */
  readonly onSubmit?: (request: SubmitRequest) => void;
  /** Called before a terminal fact is dropped. */
  readonly onAcknowledge?: (token: SubmissionToken) => void;
  /** When false, the bookkeeping `calls`/`log` are not kept (benchmarks). Default true. */
  readonly recordCalls?: boolean;
  /**
   * Default false. When true, the record's `changes` is the backend's change feed:
   * every change to a job (submit, start, end, loss, cancel, an Indeterminate toggle) is
   * logged and reported after the cursor it happened behind.
   */
  readonly reportsChanges?: boolean;
  /** Fields of the capability record as given, over the ones above (e.g. a task runner). */
  readonly capabilities?: OptionalCapabilities;
}

export interface SimulatedBackend {
  /** The port to hand to the code under test, with the capabilities it was made with. */
  readonly backend: AllocationBackend;
  /** Calls per operation since creation (or `resetCalls`). */
  readonly calls: Readonly<Record<SimOperation, number>>;
  readonly log: readonly SimCall[];
  resetCalls(): void;

  setAvailable(available: boolean): void;
  readonly available: boolean;
  /** Faults consumed one per submit request, in order. */
  failNextSubmits(...faults: SubmitFault[]): void;
  clearSubmitFaults(): void;
  setThrowing(op: SimOperation, throwing: boolean): void;
  /** A cancel takes effect after this many `step()`s (0: at once). */
  setCancelLagSteps(steps: number): void;
  setIndeterminate(handle: ExternalHandle, indeterminate: boolean): void;
  clearIndeterminate(): void;
  /** Advance simulated time by one step: due cancels take effect. */
  step(): void;

  start(handle: ExternalHandle): void;
  finish(
    handle: ExternalHandle,
    outcome: {
      readonly phase: "COMPLETED" | "FAILED" | "CANCELLED";
      readonly reason?: Reason | null;
      readonly exitCode?: number | null;
    },
  ): void;
  lose(handle: ExternalHandle): void;

  jobs(): readonly SimJob[];
  job(handle: ExternalHandle): SimJob | undefined;
  jobsByToken(token: SubmissionToken): readonly SimJob[];
  /** Tokens that were rejected (and so never had a job). */
  readonly rejectedTokens: ReadonlySet<SubmissionToken>;
  /** Tokens submitted as `freshToken` although an earlier submit already carried them. */
  readonly freshTokenViolations: readonly SubmissionToken[];
  /** The next submit call stays open (in flight) until `settleHeld`. */
  holdNextSubmit(): void;
  /** Takes back a holdNextSubmit that caught nothing; submissions already held stay held. */
  disarmHold(): void;
  /** Submit calls currently held open. */
  readonly heldSubmits: number;
  /**
   * Lets every held submit go on: "land" acts on it now, "drop" makes the call fail
   * without acting (what a killed process's half-done submission looks like).
   */
  settleHeld(how: "land" | "drop"): void;
}

const LIVE: ReadonlySet<Phase> = new Set(["QUEUED", "RUNNING", "STOPPING"]);

export function isLiveJob(job: SimJob): boolean {
  return LIVE.has(job.phase);
}

const DEFAULT_PROFILES: readonly ResourceProfile[] = [
  {
    name: "default",
    description: "simulated",
    kinds: ["BATCH", "SESSION"],
    resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: null },
  },
];

type MutableJob = { -readonly [K in keyof SimJob]: SimJob[K] };

export function createSimulatedBackend(options: SimulatedBackendOptions = {}): SimulatedBackend {
  const name = options.name ?? "simulated";
  const lookupBeforeSubmit = options.lookupBeforeSubmit ?? true;
  const recordCalls = options.recordCalls ?? true;
  const now = () => options.clock?.now() ?? 0;
  const jobs: MutableJob[] = [];
  const byHandle = new Map<string, MutableJob>();
  const byToken = new Map<string, MutableJob[]>();
  const rejectedTokens = new Set<SubmissionToken>();
  const handedOver = new Set<SubmissionToken>();
  const freshTokenViolations: SubmissionToken[] = [];
  const held: ((settled: "land" | "drop") => void)[] = [];
  let holdNext = false;
  const faults: SubmitFault[] = [];
  const throwing = new Set<SimOperation>();
  const indeterminate = new Set<string>();
  const calls = Object.fromEntries(SIM_OPERATIONS.map((op) => [op, 0])) as Record<
    SimOperation,
    number
  >;
  const log: SimCall[] = [];
  let available = true;
  let cancelLagSteps = 0;
  let stepCount = 0;
  let nextHandle = 1;
  // The change feed: one entry per change of a job, a cursor is an index into it.
  const changeLog: MutableJob[] = [];
  const touch = (job: MutableJob) => {
    if (options.reportsChanges === true) changeLog.push(job);
  };

  const enter = (op: SimOperation) => {
    if (recordCalls) calls[op] += 1;
    if (throwing.has(op)) throw new Error(`simulated ${op} failure`);
  };
  const record = (call: SimCall) => {
    if (recordCalls) log.push(call);
  };
  const findLive = (token: SubmissionToken): MutableJob | undefined =>
    byToken.get(token)?.findLast((j) => j.phase !== "LOST");

  function observationOf(job: MutableJob): AllocationObservation {
    if (indeterminate.has(job.handle)) return { kind: "Indeterminate", message: "accounting lags" };
    return {
      kind: "Observed",
      phase: job.phase,
      reason: job.reason,
      message: null,
      exitCode: job.exitCode,
      startedAt: job.startedAt,
      endedAt: job.endedAt,
      // A running job with a limit ends at start + limit, as a scheduler reports it.
      ...(job.phase === "RUNNING" && job.startedAt !== null && job.request.timeLimitSeconds !== null
        ? { deadlineAt: job.startedAt + job.request.timeLimitSeconds * 1000 }
        : {}),
    };
  }

  function create(request: SubmitRequest): MutableJob {
    const job: MutableJob = {
      handle: externalHandle(`sim-${nextHandle++}`),
      token: request.token,
      request,
      phase: "QUEUED",
      reason: null,
      exitCode: null,
      startedAt: null,
      endedAt: null,
      cancelDueStep: null,
      factAcknowledged: false,
    };
    jobs.push(job);
    byHandle.set(job.handle, job);
    touch(job);
    const list = byToken.get(job.token);
    if (list) list.push(job);
    else byToken.set(job.token, [job]);
    return job;
  }

  function end(job: MutableJob, phase: Phase, reason: Reason | null, exitCode: number | null) {
    if (!LIVE.has(job.phase)) return;
    job.phase = phase;
    job.reason = reason;
    job.exitCode = exitCode;
    job.endedAt = now();
    touch(job);
  }

  const base: Omit<AllocationBackend, "capabilities"> = {
    name,
    profiles: () => options.profiles ?? DEFAULT_PROFILES,
    async submit(requests) {
      enter("submit");
      const out = new Map<SubmissionToken, SubmitResult>();
      // At the call, before any hold: what the caller had made durable when it called.
      for (const request of requests) options.onSubmit?.(request);
      if (holdNext) {
        // A submission whose answer is slow (a busy controller, a lost answer the broker
        // waits out): the call stays open until the test settles it.
        holdNext = false;
        const settled = await new Promise<"land" | "drop">((resolve) => held.push(resolve));
        if (settled === "drop") {
          record({ op: "submit", answers: [] });
          throw new Error("simulated submission killed in flight");
        }
      }
      for (const request of requests) {
        if (request.freshToken === true && handedOver.has(request.token)) {
          // The caller promised this token was never handed over: a broken promise is how
          // a skipped lookup would put a second job behind one token.
          freshTokenViolations.push(request.token);
        }
        handedOver.add(request.token);
        const token = request.token;
        if (!available) {
          out.set(token, { kind: "Unknown", token, message: "simulated outage" });
          continue;
        }
        const fault = faults.shift();
        if (fault === "REJECT") {
          rejectedTokens.add(token);
          out.set(token, { kind: "Rejected", token, message: "simulated rejection" });
          continue;
        }
        if (fault === "UNKNOWN_WITHOUT_CREATE") {
          out.set(token, { kind: "Unknown", token, message: "simulated lost request" });
          continue;
        }
        const existing =
          lookupBeforeSubmit && request.freshToken !== true ? findLive(token) : undefined;
        const job = existing ?? create(request);
        if (fault === "UNKNOWN_AFTER_CREATE") {
          out.set(token, { kind: "Unknown", token, message: "simulated lost answer" });
        } else if (existing) {
          out.set(token, { kind: "Existing", token, handle: job.handle });
        } else {
          out.set(token, { kind: "Created", token, handle: job.handle });
        }
      }
      record({ op: "submit", answers: [...out.values()] });
      return out;
    },
    async observe(targets) {
      enter("observe");
      if (!available) {
        record({ op: "observe", targets, result: "Unavailable" });
        return { kind: "Unavailable", message: "simulated outage" };
      }
      const observations = new Map<string, AllocationObservation>();
      for (const t of targets) {
        const job = byHandle.get(t.handle);
        observations.set(
          t.allocationId,
          job
            ? observationOf(job)
            : {
                kind: "Observed",
                phase: "LOST",
                reason: "NOT_FOUND_BY_BACKEND",
                message: "unknown handle",
                exitCode: null,
                startedAt: null,
                endedAt: null,
              },
        );
      }
      record({ op: "observe", targets, result: "Observed" });
      return { kind: "Observed", observations };
    },
    async cancel(targets) {
      enter("cancel");
      const out = new Map<string, CancelResult>();
      for (const t of targets) {
        if (!available) {
          out.set(t.allocationId, { kind: "Unavailable", message: "simulated outage" });
          continue;
        }
        const job = byHandle.get(t.handle);
        if (job && LIVE.has(job.phase) && job.cancelDueStep === null) {
          job.cancelDueStep = stepCount + cancelLagSteps;
          if (cancelLagSteps === 0) end(job, "CANCELLED", null, null);
          else {
            job.phase = "STOPPING";
            touch(job);
          }
        }
        out.set(t.allocationId, { kind: "Requested" });
      }
      record({ op: "cancel", targets, available });
      return out;
    },
    async findByToken(tokens) {
      enter("findByToken");
      const out = new Map<SubmissionToken, FindResult>();
      for (const token of tokens) {
        if (!available) {
          out.set(token, { kind: "Unavailable", message: "simulated outage" });
          continue;
        }
        const job = findLive(token);
        out.set(
          token,
          job
            ? { kind: "Found", handle: job.handle, observation: observationOf(job) }
            : { kind: "Absent" },
        );
      }
      record({ op: "findByToken", answers: [...out.entries()] });
      return out;
    },
    async diagnostics(): Promise<BackendDiagnostics> {
      enter("diagnostics");
      return {
        backend: name,
        healthy: available,
        message: available ? "ok" : "simulated outage",
        calls: { ...calls },
      };
    },
  };

  const unknownHandle: AllocationObservation = {
    kind: "Observed",
    phase: "LOST",
    reason: "NOT_FOUND_BY_BACKEND",
    message: "unknown handle",
    exitCode: null,
    startedAt: null,
    endedAt: null,
  };

  async function observeChanges(
    cursor: ObservationCursor | null,
    targets: readonly ObservationTarget[],
  ): Promise<ObserveChangesResult> {
    enter("observe");
    if (!available) {
      record({ op: "observe", targets, result: "Unavailable" });
      return { kind: "Unavailable", message: "simulated outage" };
    }
    const from = cursor === null ? changeLog.length : Number(cursor);
    if (!Number.isInteger(from) || from < 0 || from > changeLog.length) {
      return { kind: "CursorExpired" };
    }
    const observations = new Map<string, AllocationObservation>();
    for (const t of targets) {
      const job = byHandle.get(t.handle);
      observations.set(t.allocationId, job ? observationOf(job) : unknownHandle);
    }
    const seen = new Set<MutableJob>();
    const changes: ObservedChange[] = [];
    for (let i = from; i < changeLog.length; i++) {
      const job = changeLog[i] as MutableJob;
      if (seen.has(job)) continue;
      seen.add(job);
      const { allocationId } = job.request;
      changes.push({
        target: { allocationId, token: job.token, handle: job.handle },
        observation: observationOf(job),
      });
    }
    record({ op: "observe", targets, result: "Observed" });
    return {
      kind: "Observed",
      observations,
      changes,
      cursor: String(changeLog.length) as ObservationCursor,
    };
  }

  const acknowledger: TerminalAllocationAcknowledger = {
    async pendingTerminalFacts(): Promise<readonly TerminalFact[]> {
      enter("pendingTerminalFacts");
      record({ op: "pendingTerminalFacts" });
      if (!available) throw new Error("simulated outage");
      return jobs
        .filter((j) => isTerminal(j.phase) && !j.factAcknowledged)
        .map((j) => ({ token: j.token }));
    },
    async acknowledgeTerminal(token) {
      enter("acknowledgeTerminal");
      record({ op: "acknowledgeTerminal" });
      if (!available) throw new Error("simulated outage");
      options.onAcknowledge?.(token);
      for (const j of byToken.get(token) ?? []) if (isTerminal(j.phase)) j.factAcknowledged = true;
    },
  };

  const mustGet = (handle: ExternalHandle): MutableJob => {
    const job = byHandle.get(handle);
    if (!job) throw new Error(`no simulated job ${handle}`);
    return job;
  };

  return {
    backend: {
      ...base,
      capabilities: {
        ...NO_CAPABILITIES,
        terminalFacts: options.acknowledger === true ? acknowledger : null,
        changes: options.reportsChanges === true ? { observeChanges } : null,
        ...options.capabilities,
      },
    },
    calls,
    log,
    resetCalls() {
      for (const op of SIM_OPERATIONS) calls[op] = 0;
      log.length = 0;
    },
    setAvailable(value) {
      available = value;
    },
    get available() {
      return available;
    },
    failNextSubmits(...more) {
      faults.push(...more);
    },
    clearSubmitFaults() {
      faults.length = 0;
    },
    setThrowing(op, value) {
      if (value) throwing.add(op);
      else throwing.delete(op);
    },
    setCancelLagSteps(steps) {
      cancelLagSteps = Math.max(0, Math.trunc(steps));
    },
    setIndeterminate(handle, value) {
      if (value) indeterminate.add(handle);
      else indeterminate.delete(handle);
      const job = byHandle.get(handle);
      if (job) touch(job);
    },
    clearIndeterminate() {
      for (const handle of indeterminate) {
        const job = byHandle.get(handle);
        if (job) touch(job);
      }
      indeterminate.clear();
    },
    step() {
      stepCount += 1;
      for (const job of jobs) {
        if (job.cancelDueStep !== null && job.cancelDueStep <= stepCount)
          end(job, "CANCELLED", null, null);
      }
    },
    start(handle) {
      const job = mustGet(handle);
      if (job.phase === "QUEUED") {
        job.phase = "RUNNING";
        job.startedAt = now();
        touch(job);
      }
    },
    finish(handle, outcome) {
      end(mustGet(handle), outcome.phase, outcome.reason ?? null, outcome.exitCode ?? null);
    },
    lose(handle) {
      end(mustGet(handle), "LOST", "NOT_FOUND_BY_BACKEND", null);
    },
    jobs: () => jobs.map((j) => ({ ...j })),
    job: (handle) => {
      const j = byHandle.get(handle);
      return j ? { ...j } : undefined;
    },
    jobsByToken: (token) => (byToken.get(token) ?? []).map((j) => ({ ...j })),
    rejectedTokens,
    freshTokenViolations,
    holdNextSubmit() {
      holdNext = true;
    },
    disarmHold() {
      holdNext = false;
    },
    get heldSubmits() {
      return held.length;
    },
    settleHeld(how) {
      for (const resolve of held.splice(0)) resolve(how);
      holdNext = false;
    },
  };
}
