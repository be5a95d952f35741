/**
 * The local backend's health: its job records readable and writable, this binary still
 * executable (every supervisor is a copy of it), and the figures an admin reads (records,
 * supervisors starting, the sandbox, how jobs are held to their limits).
 */
import { accessSync, constants as fsConstants } from "node:fs";
import type { BackendDiagnostics } from "../../core/ports/allocation-backend.ts";
import { LOCAL_BACKEND_NAME } from "./backend-options.ts";
import { describeEnforcement } from "./limit-enforcement.ts";
import type { LocalContext } from "./local-context.ts";
import { jobsDirProblem, listTokens } from "./record-store.ts";

export function localDiagnostics(ctx: LocalContext): BackendDiagnostics {
  const problems: string[] = [];
  const jobsProblem = jobsDirProblem(ctx);
  if (jobsProblem !== null) problems.push(jobsProblem);
  try {
    accessSync(ctx.jobs, fsConstants.W_OK);
  } catch (error) {
    problems.push(`job records not writable: ${String(error)}`);
  }
  const [executable] = ctx.selfCommand;
  try {
    if (executable !== undefined) accessSync(executable, fsConstants.X_OK);
  } catch (error) {
    problems.push(`cannot execute ${executable}: ${String(error)}`);
  }
  let recorded = 0;
  try {
    recorded = listTokens(ctx).length;
  } catch {
    // Already reported as a jobs directory problem.
  }
  const sandbox = ctx.sandbox;
  return {
    backend: LOCAL_BACKEND_NAME,
    healthy: problems.length === 0,
    message:
      problems.length === 0
        ? `${recorded} job records, ${ctx.launching.size} supervisors starting${sandbox === undefined ? "" : `, sandbox ${sandbox.mechanism}`}; limits: ${describeEnforcement(ctx.limits)}`
        : problems.join("; "),
    calls: { ...ctx.calls },
  };
}
