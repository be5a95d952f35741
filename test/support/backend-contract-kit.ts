/**
 * The parts of the backend contract (backend-contract.ts) its two halves share: what a test
 * file hands in (a factory of subjects), the scripts the jobs run, and the waits.
 */
import { expect } from "bun:test";
import {
  mintSubmissionToken,
  type Phase,
  type SubmissionToken,
  type Workload,
} from "../../src/core/models.ts";
import type {
  AllocationBackend,
  AllocationObservation,
  CapabilityName,
  ObservationTarget,
  SubmitRequest,
} from "../../src/core/ports/allocation-backend.ts";
import { tickBackend } from "../../src/core/reconciler/backend-calls.ts";
import { createBackendWatch } from "../../src/core/reconciler/watch.ts";
import { silentLog } from "../../src/lib/log.ts";
import { eventually } from "./eventually.ts";

/** A job's script, as `/bin/sh -c` runs it: each backend runs these for real, or simulates. */
export const SCRIPTS = {
  /** Ends at once, exit 0. */
  succeeds: "exit 0",
  /** Ends at once, exit 3. */
  fails: "exit 3",
  /** Runs until cancelled. */
  runs: "sleep 600",
} as const;

export interface ContractSubject {
  readonly backend: AllocationBackend;
  /** A fresh BATCH request running `/bin/sh -c script`, placeable on this backend. */
  request(script: string): SubmitRequest;
  /** Called before every look: moves a backend that runs nothing by itself (a simulation). */
  advance(): void;
  /** Stops whatever the subject left running and removes its files. */
  close(): Promise<void>;
}

export interface ContractFactory {
  readonly name: string;
  /** What the record must hold (true) or leave null (false): losing one fails the suite. */
  readonly capabilities: Readonly<Record<CapabilityName, boolean>>;
  /** How long a job may take to reach a phase on this backend. */
  readonly phaseTimeoutMs: number;
  /** A variable this backend's job-environment rules refuse (when its record has them). */
  readonly refusedEnvName?: string;
  /**
   * Runs job arrays: the subject's profile has a `maxArraySize` (what admission checks), and
   * an array is one job with its elements summarised. Absent: the profile has none, so
   * admission refuses every array before the backend sees it.
   */
  readonly arrays?: true;
  /** A fresh subject; async for a backend built the way the daemon builds it (a plugin's create). */
  make(): ContractSubject | Promise<ContractSubject>;
}

export const CAPABILITIES: readonly CapabilityName[] = [
  "tasks",
  "changes",
  "terminalFacts",
  "sessionIsolation",
  "launchSandbox",
  "batchGate",
  "jobEnv",
];

/** A workload that would hold a live allocation: a step refused for it is the backend's doing. */
export const RUNNING_WORKLOAD = {
  id: "w-contract",
  kind: "BATCH",
  name: "contract",
  profile: "default",
  spec: { command: ["sleep", "600"] },
  specRevision: 1,
  phase: "RUNNING",
  reason: null,
  message: null,
  desired: { kind: "RUN" },
  executionEpoch: 1,
  maxAttempts: 1,
  exitCode: null,
  idempotencyKey: null,
  createdAt: 1,
  updatedAt: 1,
  lastActiveAt: null,
} as Workload;

export function newToken(): SubmissionToken {
  return mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n)));
}

export interface Submitted {
  readonly request: SubmitRequest;
  readonly target: ObservationTarget;
}

export type SubmitScript = (script: string) => Promise<Submitted>;

/** One contract run's settings, and the wrapper that gives each test its own subject. */
export interface ContractRun {
  readonly factory: ContractFactory;
  readonly timeoutMs: number;
  /** Per test: a few phase waits and the clean-up. */
  readonly testMs: number;
  withSubject(
    body: (s: ContractSubject, submit: SubmitScript) => Promise<void>,
  ): () => Promise<void>;
}

export function contractRun(factory: ContractFactory): ContractRun {
  const timeoutMs = factory.phaseTimeoutMs;
  return {
    factory,
    timeoutMs,
    testMs: timeoutMs * 3 + 10_000,
    withSubject: (body) => async () => {
      const subject = await factory.make();
      const submitted: Submitted[] = [];
      try {
        await body(subject, async (script) => {
          const one = await submitOne(subject, script);
          submitted.push(one);
          return one;
        });
      } finally {
        // Nothing left running on a shared machine or cluster, whatever failed.
        const live = submitted.map((s) => s.target);
        if (live.length > 0) await subject.backend.cancel(live).catch(() => undefined);
        await subject.close();
      }
    },
  };
}

/** A subject for a test that submits nothing, closed after `body`. */
export async function withBareSubject(
  factory: ContractFactory,
  body: (s: ContractSubject) => void | Promise<void>,
): Promise<void> {
  const subject = await factory.make();
  try {
    await body(subject);
  } finally {
    await subject.close();
  }
}

export async function submitOne(s: ContractSubject, script: string): Promise<Submitted> {
  const request = s.request(script);
  const result = (await s.backend.submit([request])).get(request.token);
  if (result?.kind !== "Created") {
    throw new Error(`submit did not create a job: ${JSON.stringify(result)}`);
  }
  expect(result.token).toBe(request.token);
  const target = {
    allocationId: request.allocationId,
    token: request.token,
    handle: result.handle,
  };
  return { request, target };
}

export async function observeOne(
  s: ContractSubject,
  t: ObservationTarget,
): Promise<AllocationObservation> {
  s.advance();
  const result = await s.backend.observe([t]);
  if (result.kind !== "Observed") throw new Error(`unavailable: ${result.message}`);
  const o = result.observations.get(t.allocationId);
  if (o === undefined) throw new Error("a target without an observation");
  return o;
}

export async function waitForPhase(
  s: ContractSubject,
  t: ObservationTarget,
  accept: (phase: Phase) => boolean,
  timeoutMs: number,
): Promise<AllocationObservation> {
  return await eventually(
    async () => {
      const o = await observeOne(s, t);
      return o.kind === "Observed" && accept(o.phase) ? o : null;
    },
    { what: `a phase of ${t.allocationId}`, timeoutMs, intervalMs: 100 },
  );
}

/** The reconciler's view of the backend, as a tick sees it. */
export function tickCalls(backend: AllocationBackend) {
  return tickBackend(
    backend,
    silentLog,
    createBackendWatch({ slowCallMs: 60_000, monotonicMs: () => performance.now() }),
  );
}
