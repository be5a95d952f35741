/** What diagnostics say of the scheduler: the last call's outcome, the call counts, orphans. */
import type { BackendDiagnostics } from "../../core/ports/allocation-backend.ts";
import type { SlurmContext } from "./slurm-context.ts";

export function slurmDiagnostics(ctx: SlurmContext): BackendDiagnostics {
  return {
    backend: "slurm",
    healthy: ctx.health.healthy,
    message: ctx.health.message,
    calls: ctx.broker.callCounts(),
    ...(ctx.options.orphanReport === undefined ? {} : { orphans: ctx.options.orphanReport() }),
    ...(ctx.options.profileChecks === undefined
      ? {}
      : { profileChecks: ctx.options.profileChecks() }),
  };
}
