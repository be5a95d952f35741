/**
 * The AllocationBackend for a Slurm cluster. Three behaviours are load-bearing:
 *
 * 1. A lost submission is Unknown, never a failure, and `submit` begins by asking whether the
 *    token is already out there, so the retry after an Unknown returns Existing instead of a
 *    second job on the cluster (INV-8). The lookup matches JobName as well as Comment: sacct
 *    persists Comment only where the site sets AccountingStoreFlags=job_comment (and only
 *    once the job ended), while JobName is an ordinary accounting field. When the lookup
 *    cannot be answered, submit returns Unknown rather than pressing on: absence of an answer
 *    is not an answer of absence.
 * 2. A job in neither the queue nor accounting is LOST, never COMPLETED, and only on
 *    evidence: successful answers from both, for several observations over a grace period,
 *    because accounting lags the controller by seconds (a short job may first appear there
 *    under the name "allocation").
 * 3. An unreachable scheduler leaves every phase where it was (observe says Unavailable).
 *
 * Observation is batched so scheduler calls per tick stay constant as jobs grow: one squeue
 * for every target (filtered by our job names, all states, so a job that ended less than
 * MinJobAge ago is still read from the controller), and one sacct only for the targets that
 * have left the controller. Submissions of a tick share one token lookup (one squeue, one
 * sacct) and then cost one sbatch each.
 *
 * A multi-node SESSION is one launcher task per node, each worker resolving its rank from
 * SLURM_PROCID; only paths reach the job's environment and command line, never a credential
 * value. `runTask` runs a step inside the allocation the workload already holds and refuses
 * when it is not running: submitting a fresh allocation instead is exactly what INV-4 forbids.
 *
 * This backend's record has no session isolation (`sessionIsolation: null`): jobs of one
 * service account share a uid, and 0600 files do not separate them.
 */

import type { SubmissionToken } from "../../core/models.ts";
import { NO_CAPABILITIES } from "../../core/ports/allocation-backend.ts";
import type { SlurmBackend, SlurmBackendOptions } from "./backend-options.ts";
import { jobEnvRefusals } from "./broker-validation.ts";
import { cancelAll } from "./cancel.ts";
import { findByToken } from "./find-by-token.ts";
import { observeAll } from "./observe.ts";
import { createFeedState, observeChanges } from "./observe-changes.ts";
import { createSlurmContext } from "./slurm-context.ts";
import { slurmDiagnostics } from "./slurm-diagnostics.ts";
import { submitAll } from "./submit.ts";
import { runTask } from "./tasks.ts";

export {
  DEFAULT_JOB_PATH,
  DEFAULT_WARN_BEFORE_LIMIT_SECONDS,
  type PlacementCatalog,
  type SlurmBackend,
  type SlurmBackendOptions,
  type SlurmPlacement,
} from "./backend-options.ts";
export { JOB_ENV, RANK_ENV, TASK_ENV } from "./task-env.ts";

export function createSlurmBackend(options: SlurmBackendOptions): SlurmBackend {
  const ctx = createSlurmContext(options);
  const feed = createFeedState(options.feedInstance ?? crypto.randomUUID());
  return {
    name: "slurm",
    profiles: () => ctx.placements.profiles(),
    async submit(requests) {
      return submitAll(ctx, requests);
    },
    async observe(targets) {
      return observeAll(ctx, targets);
    },
    async cancel(targets) {
      return cancelAll(ctx, targets);
    },
    async findByToken(tokens: readonly SubmissionToken[]) {
      return findByToken(ctx, tokens);
    },
    async diagnostics() {
      return slurmDiagnostics(ctx);
    },
    capabilities: {
      ...NO_CAPABILITIES,
      tasks: {
        async runTask(target, command, taskOptions) {
          return runTask(ctx, target, command, taskOptions);
        },
      },
      changes: {
        async observeChanges(cursor, targets) {
          return observeChanges(ctx, feed, cursor, targets);
        },
      },
      jobEnv: { jobEnvRefusals },
    },
  };
}
