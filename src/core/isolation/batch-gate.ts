/**
 * BATCH fails closed. A daemon that is not root runs its jobs as its own uid; outside a
 * verified sandbox such a job reads everything the daemon owns (measured in issue 18: a
 * BATCH job of an unprivileged daemon without bubblewrap read `admin-token` and listed the
 * database and `api.sock`). So BATCH is then refused as SESSION is, with
 * ISOLATION_UNAVAILABLE, unless the admin started the daemon with `--allow-unsandboxed-batch`.
 * A root daemon's jobs run as other uids (`--run-as` or a leased one), so this never closes.
 */
import type { AttemptPreparer } from "../attempt-preparer.ts";
import { decorateBackend } from "../decorate-backend.ts";
import {
  type AllocationBackend,
  type BatchPlacementGate,
  batchRefusal,
  launchesSandboxed,
} from "../ports/allocation-backend.ts";

export interface BatchGatePolicy {
  /** The daemon's jobs keep its uid (it is not root). */
  readonly jobsKeepDaemonUid: boolean;
  /** `serve --allow-unsandboxed-batch`: the admin accepted the risk. */
  readonly allowUnsandboxedBatch: boolean;
}

/** The flag an admin names to accept BATCH jobs running as the daemon's uid, unsandboxed. */
export const ALLOW_UNSANDBOXED_BATCH_FLAG = "--allow-unsandboxed-batch";

/** Why BATCH is refused now, or null. Pure: `sandboxed` is the backend's answer of the moment. */
export function unsandboxedBatchRefusal(
  policy: BatchGatePolicy,
  sandboxed: boolean,
): string | null {
  if (!policy.jobsKeepDaemonUid || policy.allowUnsandboxedBatch || sandboxed) return null;
  return `this daemon is not root, so its jobs would run as its own uid, and no per-allocation sandbox is verified: a job could read the daemon's database, keys and admin token. Make bubblewrap work for the daemon's account (see the diagnostics), or start it with ${ALLOW_UNSANDBOXED_BATCH_FLAG} to accept that risk`;
}

/** The backend answering BatchPlacementGate from `policy` and its own launchesSandboxed(). */
export function gatedUnsandboxedBatch<B extends AllocationBackend>(
  backend: B,
  policy: BatchGatePolicy,
): B & { readonly capabilities: B["capabilities"] & { readonly batchGate: BatchPlacementGate } } {
  return decorateBackend(
    backend,
    {},
    {
      batchGate: {
        batchRefusal: () => unsandboxedBatchRefusal(policy, launchesSandboxed(backend)),
      },
    },
  );
}

/**
 * The preparer of BATCH attempts behind the same gate: a workload admitted before the daemon
 * lost its sandbox (a restart without bubblewrap) must not start as the daemon's uid either.
 * It throws, so the attempt stays SUBMITTING and is prepared again on a later tick: nothing is
 * lost, and it starts once the sandbox is back (verified on a cluster's nodes, or a restart).
 */
export function gatedBatchPreparer(
  preparer: AttemptPreparer,
  backend: AllocationBackend,
): AttemptPreparer {
  return {
    async prepare(workload, allocation) {
      const refusal = batchRefusal(backend);
      if (refusal !== null) throw new Error(`BATCH not started: ${refusal}`);
      return preparer.prepare(workload, allocation);
    },
  };
}
