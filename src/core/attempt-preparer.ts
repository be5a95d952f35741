/**
 * The durable spec is what operators read back; the submitted one is derived from it per
 * attempt, so that something bound to (allocation, epoch) — a session credential — can exist
 * at all without ever being written into spec_json. A recovery is therefore a genuinely new
 * attempt: new epoch, new derivation.
 */
import type { Allocation, Reason, Workload } from "./models.ts";
import type { Launch } from "./ports/allocation-backend.ts";

export interface PreparedAttempt {
  readonly launch: Launch;
  /** Directory owned by the daemon for this allocation (logs, credentials, markers). */
  readonly allocationDir: string;
  /** The workload's workspace: the allocation's working directory. */
  readonly workspaceDir: string;
  readonly timeLimitSeconds: number | null;
}

export type PrepareResult =
  | { readonly kind: "Prepared"; readonly attempt: PreparedAttempt }
  /** The attempt must not be submitted; the workload fails with this reason. */
  | { readonly kind: "Refused"; readonly reason: Reason; readonly message: string }
  /**
   * Not yet: something the attempt needs has no answer yet (the nodes' first sandbox probe).
   * The attempt stays SUBMITTING, unsubmitted, and is prepared again on a later tick.
   */
  | { readonly kind: "NotYet"; readonly message: string };

export interface AttemptPreparer {
  /**
   * Must be re-executable: a tick that died after preparing and before submitting prepares
   * the same allocation again, and the result must be equivalent.
   */
  prepare(workload: Workload, allocation: Allocation): Promise<PrepareResult>;
}
