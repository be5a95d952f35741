/**
 * The default AttemptPreparer for BATCH workloads: the submitted spec is the durable one,
 * run as a plain command in the workload's workspace. Nothing bound to (allocation, epoch)
 * is derived (BATCH never gets a worker credential), but the allocation still gets its own
 * directory, because logs and markers of two attempts must not overwrite each other.
 *
 * Re-executable, as the port demands: preparing the same attempt again (a tick that died
 * between prepare and submit) finds the directories there and returns the same attempt.
 */
import { dirname } from "node:path";
import type { AttemptPreparer, PrepareResult } from "../../core/attempt-preparer.ts";
import type { StateLayout } from "../../core/layout.ts";
import type { Allocation, Workload } from "../../core/models.ts";
import type { LaunchTasks } from "../../core/ports/allocation-backend.ts";
import { makeDirsBeneath } from "../../lib/beneath-fs.ts";

export interface BatchPreparerOptions {
  readonly layout: StateLayout;
}

/** 0700: the workspace holds the user's data and the allocation dir its logs. */
const PRIVATE_DIR_MODE = 0o700;

/**
 * Synchronous on purpose: six promise round trips through the I/O thread pool were about a
 * millisecond of every POST → submitted path, ten times the calls themselves; the backends
 * create files in these same directories synchronously right after. Reached from the spool
 * with no link followed, shared parents opened once (beneath-fs.ts), and each tightened
 * when an earlier attempt, or someone with a looser umask, left it looser.
 */
function privateDirs(spool: string, paths: readonly string[]): void {
  makeDirsBeneath(spool, paths, { mode: PRIVATE_DIR_MODE, exactMode: true });
}

/** Several tasks only when asked for (admission stores `tasks` only when above one). */
function tasksOf(workload: Workload): { readonly tasks?: LaunchTasks } {
  const count = workload.spec.tasks;
  if (count === undefined || count <= 1) return {};
  return { tasks: { count, perNode: workload.spec.tasksPerNode ?? null } };
}

export function batchPreparer(options: BatchPreparerOptions): AttemptPreparer {
  const { layout } = options;
  return {
    async prepare(workload: Workload, allocation: Allocation): Promise<PrepareResult> {
      if (workload.kind !== "BATCH") {
        return {
          kind: "Refused",
          reason: "INTERNAL_ERROR",
          message: `the batch preparer was given a ${workload.kind} workload`,
        };
      }
      const command = workload.spec.command;
      if (command === undefined || command.length === 0) {
        return {
          kind: "Refused",
          reason: "INTERNAL_ERROR",
          message: "a BATCH workload needs a non-empty command",
        };
      }
      const workspaceDir = layout.workspaceDir(workload.id);
      const allocationDir = layout.allocationDir(workload.id, allocation.id);
      // Failures here (permissions, a full disk) throw: broken infrastructure, which the
      // reconciler logs and retries next tick, rather than a refusal that fails the workload.
      privateDirs(layout.spool, [
        layout.workloadDir(workload.id),
        workspaceDir,
        dirname(allocationDir),
        allocationDir,
      ]);
      return {
        kind: "Prepared",
        attempt: {
          launch: {
            kind: "COMMAND",
            command: [...command],
            env: { ...(workload.spec.env ?? {}) },
            ...tasksOf(workload),
          },
          allocationDir,
          workspaceDir,
          timeLimitSeconds: workload.spec.timeLimitSeconds ?? null,
        },
      };
    },
  };
}
