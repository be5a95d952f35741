/**
 * `openai4s wait`'s exit status, shaped like a batch scheduler's submit-and-wait: a job that ended on its own
 * gives its own exit code, so `openai4s wait "$ID" && next-step` and a pipeline's `$?` read
 * the way they do on a cluster. Ends that are not the program's own get codes of their own,
 * fixed and documented (`wait --help`, docs/api.md), because "1" for every unsuccessful end
 * told a script nothing: it could not tell a failed program from a cancelled or lost job.
 */

import type { Phase } from "../../core/models.ts";

/** The workload fields the status is read from. */
export interface EndedWorkload {
  readonly phase: Phase;
  readonly reason: string | null;
  readonly exitCode: number | null;
}

/** COMPLETED (or READY reached). */
export const WAIT_OK = 0;
/** FAILED with no exit code of the program's own (refused, infrastructure, killed). */
export const WAIT_FAILED = 1;
/** The job hit its time limit: timeout(1)'s code for a command that timed out. */
export const WAIT_TIME_LIMIT = 124;
/** CANCELLED, by anyone: 128 + SIGTERM, how a shell reports a program a cancel stopped. */
export const WAIT_CANCELLED = 143;
/** LOST: the backend lost track of it (sysexits' EX_UNAVAILABLE). */
export const WAIT_LOST = 69;
/** `--timeout` expired while the workload had not ended (sysexits' EX_TEMPFAIL: try later). */
export const WAIT_GAVE_UP = 75;

/** The exit status for a workload that ended otherwise than COMPLETED. */
export function endedStatus(w: EndedWorkload): number {
  if (w.phase === "COMPLETED") return WAIT_OK;
  if (w.phase === "CANCELLED") return WAIT_CANCELLED;
  if (w.phase === "LOST") return WAIT_LOST;
  if (w.reason === "TIME_LIMIT_EXCEEDED") return WAIT_TIME_LIMIT;
  // The program's own code, when it has one a shell can carry (1-255); 0 on a FAILED end
  // (a signal a scheduler recorded as exit 0) is no success to report.
  const code = w.exitCode;
  if (code !== null && Number.isInteger(code) && code >= 1 && code <= 255) return code;
  return WAIT_FAILED;
}

/** The table for `--help`. */
export const WAIT_STATUS_HELP = `Exit status:
  0    the state was reached (for TERMINAL: the workload COMPLETED)
  N    it FAILED and its program exited N (1-255), as a scheduler's wait returns it
  1    it FAILED without an exit code of its own (refused, infrastructure), or the
       daemon could not be asked
  2    usage error
  69   it was LOST (the backend lost track of it)
  75   --timeout expired before it ended
  124  it ran out of its time limit (TIME_LIMIT_EXCEEDED)
  143  it was CANCELLED
Use --json (the workload as the API gives it) where a job's own code may collide.`;
