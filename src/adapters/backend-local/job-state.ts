/**
 * What a job directory says about its allocation, read in one pass and turned into the
 * port's vocabulary by a pure function (so the mapping is tested without processes).
 *
 * The read order is load-bearing: the supervisor writes exit.json and only then exits, so the
 * reader checks the supervisor's liveness FIRST and reads exit.json AFTER. Read the other way
 * round, a job that ends between the two reads looks like "no exit record, supervisor dead"
 * and a COMPLETED job would be reported LOST.
 */
import { constants } from "node:os";
import { arrayObservation, type TimedElementState } from "../../core/array/array-observation.ts";
import type { AllocationObservation } from "../../core/ports/allocation-backend.ts";
import { type ElementRecord, type ElementsCache, readElements } from "./array-records.ts";
import { isAlive } from "./proc.ts";
import {
  type CancelRequest,
  type Claim,
  cancelRequestSchema,
  claimSchema,
  type ExitRecord,
  exitRecordSchema,
  JOB_FILES,
  type JobRecord,
  type JobStart,
  jobRecordSchema,
  jobStartSchema,
  readJobFile,
  type SupervisorClaim,
} from "./records.ts";

export type JobSnapshot =
  | { readonly kind: "Absent" }
  /** Recorded, not yet taken by any supervisor: a launch is pending (or was interrupted). */
  | {
      readonly kind: "Unclaimed";
      readonly record: JobRecord;
      readonly cancel: CancelRequest | null;
    }
  | {
      readonly kind: "Withdrawn";
      readonly record: JobRecord;
      readonly claim: Extract<Claim, { readonly kind: "Withdrawn" }>;
    }
  | {
      readonly kind: "Claimed";
      readonly record: JobRecord;
      readonly claim: SupervisorClaim;
      readonly supervisorAlive: boolean;
      readonly job: JobStart | null;
      readonly exit: ExitRecord | null;
      readonly cancel: CancelRequest | null;
      /** A job array's elements (array-records.ts); null for a single job. */
      readonly elements: ReadonlyMap<number, ElementRecord> | null;
    };

/** Throws on I/O or format errors: the caller turns that into Indeterminate, never LOST. */
export function readJobSnapshot(
  dir: string,
  currentBootId: string,
  /** A job array's elements read so far, to read only what was appended since. */
  elementsCache?: ElementsCache,
): JobSnapshot {
  const record = readJobFile(dir, JOB_FILES.record, jobRecordSchema);
  if (record === null) return { kind: "Absent" };
  const claim = readJobFile(dir, JOB_FILES.claim, claimSchema);
  const cancel = readJobFile(dir, JOB_FILES.cancel, cancelRequestSchema);
  if (claim === null) return { kind: "Unclaimed", record, cancel };
  if (claim.kind === "Withdrawn") return { kind: "Withdrawn", record, claim };
  const job = readJobFile(dir, JOB_FILES.job, jobStartSchema);
  const supervisorAlive = isAlive(claim, currentBootId);
  const exit = readJobFile(dir, JOB_FILES.exit, exitRecordSchema);
  // After the liveness read, like exit.json: an element's end is appended before its
  // supervisor could exit, so "alive, then no end" never hides an end that happened.
  const elements =
    record.array === undefined ? null : readElements(dir, record.array.size, elementsCache);
  return { kind: "Claimed", record, claim, supervisorAlive, job, exit, cancel, elements };
}

/**
 * When the supervisor ends a job for its time limit: its start plus the limit, epoch ms (null:
 * no limit). The supervisor's timer, the job's OPENAI4S_DEADLINE and the TIME_REMAINING view
 * all use this one value, so they agree to the millisecond (the second, for the variable).
 */
export function jobDeadlineMs(startedAt: number, timeLimitSeconds: number | null): number | null {
  return timeLimitSeconds === null ? null : startedAt + timeLimitSeconds * 1000;
}

export function signalNumber(signal: string): number | null {
  const n = (constants.signals as Readonly<Record<string, number | undefined>>)[signal];
  return n ?? null;
}

/** Bun reports a signal as a name or (rarely) a number; records keep the name. */
export function signalName(signal: string | number | null): string | null {
  if (signal === null || typeof signal === "string") return signal;
  const signals = constants.signals as Readonly<Record<string, number>>;
  return Object.keys(signals).find((name) => signals[name] === signal) ?? `SIG${signal}`;
}

function observed(
  fields: Pick<AllocationObservation & { kind: "Observed" }, "phase" | "reason" | "message"> &
    Partial<
      Pick<
        AllocationObservation & { kind: "Observed" },
        "exitCode" | "startedAt" | "endedAt" | "deadlineAt"
      >
    >,
): AllocationObservation {
  return {
    kind: "Observed",
    phase: fields.phase,
    reason: fields.reason,
    message: fields.message,
    exitCode: fields.exitCode ?? null,
    startedAt: fields.startedAt ?? null,
    endedAt: fields.endedAt ?? null,
    ...(fields.deadlineAt !== undefined ? { deadlineAt: fields.deadlineAt } : {}),
  };
}

/** The terminal observation an exit record stands for. */
export function exitObservation(exit: ExitRecord): AllocationObservation {
  const times = { startedAt: exit.startedAt, endedAt: exit.endedAt };
  // A job killed by a signal has no exit code; the shell's 128+N keeps "nonzero" visible.
  const signalled = exit.signal === null ? null : signalNumber(exit.signal);
  const code = exit.exitCode ?? (signalled === null ? null : 128 + signalled);
  switch (exit.reason) {
    case "EXITED":
      if (exit.signal === null && exit.exitCode === 0) {
        return observed({
          phase: "COMPLETED",
          reason: "EXITED_ZERO",
          message: exit.message,
          exitCode: 0,
          ...times,
        });
      }
      return observed({
        phase: "FAILED",
        reason: "NONZERO_EXIT",
        message: exit.message,
        exitCode: code,
        ...times,
      });
    case "TIME_LIMIT":
      return observed({
        phase: "FAILED",
        reason: "TIME_LIMIT_EXCEEDED",
        message: exit.message,
        exitCode: code,
        ...times,
      });
    case "CANCELLED":
      return observed({
        phase: "CANCELLED",
        reason: "USER_CANCELLED",
        message: exit.message,
        exitCode: code,
        ...times,
      });
    case "TERMINATED":
      return observed({
        phase: "CANCELLED",
        reason: "CANCELLED_BY_BACKEND",
        message: exit.message,
        exitCode: code,
        ...times,
      });
    case "OUT_OF_MEMORY":
      return observed({
        phase: "FAILED",
        reason: "OUT_OF_MEMORY",
        message: exit.message,
        exitCode: code,
        ...times,
      });
    case "LAUNCH_FAILED":
      return observed({
        phase: "FAILED",
        reason: "NONZERO_EXIT",
        message: exit.message,
        exitCode: code,
        ...times,
      });
    case "SPOOL_FULL":
      return observed({
        phase: "FAILED",
        reason: "SPOOL_FULL",
        message: exit.message,
        exitCode: code,
        ...times,
      });
    default: {
      const unreachable: never = exit.reason;
      throw new Error(`unhandled exit reason ${String(unreachable)}`);
    }
  }
}

/** The observation a present record stands for. Absent is the caller's to interpret. */
export function observationOf(
  snapshot: Exclude<JobSnapshot, { readonly kind: "Absent" }>,
): AllocationObservation {
  const size = snapshot.record.array?.size;
  if (size !== undefined) return arrayObservationOf(snapshot, size);
  return singleObservationOf(snapshot);
}

/** What a single job's record (or an array's as a whole, before its elements) stands for. */
function singleObservationOf(
  snapshot: Exclude<JobSnapshot, { readonly kind: "Absent" }>,
): AllocationObservation {
  switch (snapshot.kind) {
    case "Unclaimed":
      return observed({
        phase: "QUEUED",
        reason: null,
        message: "recorded; waiting for its supervisor",
      });
    case "Withdrawn":
      switch (snapshot.claim.outcome) {
        case "CANCELLED":
          return observed({
            phase: "CANCELLED",
            reason: "USER_CANCELLED",
            message: snapshot.claim.message,
            endedAt: snapshot.claim.at,
          });
        case "SUPERVISOR_FAILED":
          return observed({
            phase: "FAILED",
            reason: "INTERNAL_ERROR",
            message: snapshot.claim.message,
            endedAt: snapshot.claim.at,
          });
        default: {
          const unreachable: never = snapshot.claim.outcome;
          throw new Error(`unhandled outcome ${String(unreachable)}`);
        }
      }
    case "Claimed": {
      if (snapshot.exit !== null) return exitObservation(snapshot.exit);
      const startedAt = snapshot.job?.startedAt ?? null;
      if (!snapshot.supervisorAlive) {
        // The one case that must never read as success: the job may have finished, failed or
        // be running unsupervised, and nobody recorded which.
        return observed({
          phase: "LOST",
          reason: "NOT_FOUND_BY_BACKEND",
          message: "the job's supervisor is gone and left no exit record",
          startedAt,
        });
      }
      if (snapshot.job === null) {
        return observed({
          phase: "QUEUED",
          reason: null,
          message: "supervisor is starting the job",
        });
      }
      const deadlineAt = jobDeadlineMs(snapshot.job.startedAt, snapshot.record.timeLimitSeconds);
      if (snapshot.cancel !== null) {
        return observed({
          phase: "STOPPING",
          reason: null,
          message: "cancel requested",
          startedAt,
          deadlineAt,
        });
      }
      return observed({
        phase: "RUNNING",
        reason: null,
        message: "running",
        startedAt,
        deadlineAt,
      });
    }
    default: {
      const unreachable: never = snapshot;
      throw new Error(`unhandled snapshot ${JSON.stringify(unreachable)}`);
    }
  }
}

type Claimed = Extract<JobSnapshot, { readonly kind: "Claimed" }>;

/**
 * A job array: each element read like a single job (its own end, else its start and the
 * supervisor's liveness), then summed up by the core's rules. Before a supervisor claimed it
 * (or when it was withdrawn) every element is what the whole array is.
 */
function arrayObservationOf(
  snapshot: Exclude<JobSnapshot, { readonly kind: "Absent" }>,
  size: number,
): AllocationObservation {
  const states = new Map<number, TimedElementState>();
  if (snapshot.kind !== "Claimed") {
    const whole = timed(singleObservationOf(snapshot));
    for (let index = 0; index < size; index += 1) states.set(index, whole);
    return arrayObservation(size, states);
  }
  for (let index = 0; index < size; index += 1) {
    states.set(index, elementState(snapshot, snapshot.elements?.get(index)));
  }
  return arrayObservation(size, states);
}

function elementState(snapshot: Claimed, element: ElementRecord | undefined): TimedElementState {
  if (element !== undefined && element.exit !== null) return timed(exitObservation(element.exit));
  // Ended as a whole with no end of its own: stopped before this element started.
  if (snapshot.exit !== null) return timed(exitObservation(snapshot.exit));
  const startedAt = element?.start?.startedAt ?? null;
  const at = { startedAt, endedAt: null };
  if (!snapshot.supervisorAlive) {
    // Never success: it may have run, ended or still run, and nobody recorded which.
    return { phase: "LOST", reason: "NOT_FOUND_BY_BACKEND", exitCode: null, ...at };
  }
  if (startedAt === null) return { phase: "QUEUED", reason: null, exitCode: null, ...at };
  const phase = snapshot.cancel === null ? "RUNNING" : "STOPPING";
  return { phase, reason: null, exitCode: null, ...at };
}

function timed(observation: AllocationObservation): TimedElementState {
  if (observation.kind !== "Observed") throw new Error("an element is always observed");
  const { phase, reason, exitCode, startedAt, endedAt } = observation;
  return { phase, reason, exitCode, startedAt, endedAt };
}
