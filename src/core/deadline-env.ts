/**
 * The variable a job (and a session's kernel, whose `time_remaining()` reads it) finds its
 * deadline in: the epoch second at which the backend ends it for its time limit. Absent when
 * the job has no limit. Every backend sets it from the same end time it reports as the
 * allocation's `deadlineAt`, so the job and the TIME_REMAINING view agree.
 */
export const DEADLINE_ENV = "OPENAI4S_DEADLINE";

/** The variable's value for a deadline in epoch ms: whole seconds, rounded down (never late). */
export function deadlineEnvValue(deadlineMs: number): string {
  return String(Math.floor(deadlineMs / 1000));
}
