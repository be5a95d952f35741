/**
 * What the session rules need to know about an attempt the preparer set up: how many ranks
 * it was launched with (its attempt record) and the workspace marker its workers must read
 * back. The files and their format belong to the preparer (adapters/spool/session-attempts.ts
 * implements this); the rules only ask.
 */

/**
 * The most ranks any record may claim whatever the profile: a bound before the profile's
 * own, so a record is never trusted to size an array (issue 8: `{"ranks": 20000000}` cost
 * gigabytes of memory and 100 % CPU on every start).
 */
export const SESSION_MAX_RANKS = 4096;

export interface SessionAttemptRecord {
  /** How many workers (one per node) this attempt was launched with. */
  readonly ranks: number;
}

export type SessionAttemptRead =
  /** This allocation was never prepared as a session (or its record is gone). */
  | { readonly kind: "Missing" }
  | { readonly kind: "Invalid"; readonly message: string }
  | { readonly kind: "Valid"; readonly record: SessionAttemptRecord };

export interface WorkspaceMarkerProbe {
  /** Where each worker reads the marker (a path on the workers' side). */
  readonly path: string;
  /** What the marker must say for this attempt. */
  readonly expect: string;
}

export interface SessionAttempts {
  /**
   * The attempt's record, validated, with `maxRanks` the bound it was written under: a bad
   * record is an invalid attempt, never a crash.
   */
  read(workloadId: string, allocationId: string, maxRanks: number): SessionAttemptRead;
  /** The workspace marker of the attempt (allocation, epoch) of a workload. */
  workspaceMarker(workloadId: string, allocationId: string, epoch: number): WorkspaceMarkerProbe;
}
