/**
 * A step (`runTask`) beside a running local job, the backend's side: refused unless the
 * allocation's record says it is RUNNING, then run by tasks.ts's runStep with the job's own
 * deadline, in its sandbox and cgroup.
 */
import type { ObservationTarget, TaskResult } from "../../core/ports/allocation-backend.ts";
import { observationOf } from "./job-state.ts";
import type { LocalContext, Looked } from "./local-context.ts";
import { look } from "./supervisors.ts";
import { runStep } from "./tasks.ts";

export async function runTaskOne(
  ctx: LocalContext,
  target: ObservationTarget,
  command: readonly string[],
  timeoutMs: number,
): Promise<TaskResult> {
  let looked: Looked;
  try {
    looked = look(ctx, target.token, false);
  } catch (error) {
    return { kind: "Unavailable", message: `cannot read the job record: ${String(error)}` };
  }
  if (looked.kind === "Absent") return { kind: "Refused", message: "no such allocation here" };
  const snapshot = looked.snapshot;
  // Its elements are separate processes in separate cgroups: there is no one job to join.
  if (snapshot.record.array !== undefined) {
    return { kind: "Refused", message: "a job array has no single allocation to run a step in" };
  }
  const observation = observationOf(snapshot);
  if (snapshot.kind !== "Claimed" || observation.kind !== "Observed") {
    return { kind: "Refused", message: "the allocation is not running" };
  }
  if (observation.phase !== "RUNNING") {
    return { kind: "Refused", message: `the allocation is ${observation.phase}, not RUNNING` };
  }
  if (command.length === 0) return { kind: "Refused", message: "empty command" };
  ctx.count("runTask");
  return runStep(snapshot.record, command, {
    wrapper: ctx.wrapper,
    sandboxReadOnly: ctx.sandboxReadOnly,
    programs: ctx.programs,
    timeoutMs,
    outputCapBytes: ctx.taskOutputCapBytes,
    // The same end time the job's own variable and the observation carry.
    deadlineMs: observation.deadlineAt ?? null,
  });
}
