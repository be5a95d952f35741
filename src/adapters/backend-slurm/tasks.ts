/**
 * A step inside the allocation the workload already holds (srun through the broker), refused
 * when the job is not running: submitting a fresh allocation instead is exactly what INV-4
 * forbids.
 */
import { DEADLINE_ENV, deadlineEnvValue } from "../../core/deadline-env.ts";
import type {
  ObservationTarget,
  TaskResult,
  TaskRunner,
} from "../../core/ports/allocation-backend.ts";
import { carries } from "./observe-rows.ts";
import type { SlurmContext } from "./slurm-context.ts";
import { normaliseState } from "./state-table.ts";

export async function runTask(
  ctx: SlurmContext,
  target: ObservationTarget,
  command: readonly string[],
  { timeoutMs, submitAs }: Parameters<TaskRunner["runTask"]>[2],
): Promise<TaskResult> {
  const queue = await ctx.broker.listQueue([target.token]);
  if (queue.kind === "Failed") {
    ctx.noteFailure(queue.error);
    return { kind: "Unavailable", message: queue.error.message };
  }
  ctx.noteSuccess("squeue");
  const row = queue.value.find((r) => r.jobId === target.handle && carries(r, target.token));
  if (row === undefined) {
    return { kind: "Refused", message: "no live allocation: the job is not in the queue" };
  }
  const state = normaliseState(row.state);
  if (state !== "RUNNING") {
    return { kind: "Refused", message: `no live allocation: the job is ${state}` };
  }
  const result = await ctx.broker.runStep({
    jobId: row.jobId,
    command,
    // The step sees the same OPENAI4S_DEADLINE as its job: squeue's EndTime of a running
    // job, the controller's own deadline (what the batch script reads, and what
    // observations report as deadlineAt). srun run from here has no job shell to copy it.
    env:
      row.endedAt === null
        ? ctx.baseJobEnv
        : { ...ctx.baseJobEnv, [DEADLINE_ENV]: deadlineEnvValue(row.endedAt) },
    workDir: row.workDir.startsWith("/") ? row.workDir : null,
    timeoutMs,
    maxOutputBytes: ctx.taskMaxOutputBytes,
    // The scheduler's own backstop, should this daemon die before its timer fires.
    timeLimitMinutes: Math.max(1, Math.ceil(timeoutMs / 60_000) + 1),
    ...(submitAs === undefined ? {} : { submitAs }),
  });
  if (result.kind === "Answered") {
    const { exitCode, stdout, stderr } = result.value;
    return { kind: "Completed", exitCode, stdout, stderr };
  }
  const error = result.error;
  switch (error.kind) {
    case "refused":
      return { kind: "Refused", message: error.message };
    case "timed_out":
      return {
        kind: "Unavailable",
        message: `the task did not finish within ${timeoutMs} ms and was stopped`,
      };
    case "unreachable":
    case "malformed":
      ctx.noteFailure(error);
      return { kind: "Unavailable", message: error.message };
    default: {
      const never: never = error.kind;
      throw new Error(`unhandled error kind ${String(never)}`);
    }
  }
}
