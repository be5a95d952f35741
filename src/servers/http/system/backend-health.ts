/**
 * The backend's health as every page shows it: its own report, asked with a bound, and the
 * reconciler's call watch, joined by the one verdict (`core/backend-health.ts`).
 * `/v1/diagnostics`, `/metrics` and `/ui/cluster` read it here, so they cannot disagree.
 */
import { type BackendHealthVerdict, backendHealthVerdict } from "../../../core/backend-health.ts";
import type { BackendDiagnostics } from "../../../core/ports/allocation-backend.ts";
import { withDeadline } from "../../../lib/clock.ts";
import type { ApiDeps } from "../deps.ts";

export const DEFAULT_DIAGNOSTICS_TIMEOUT_MS = 5000;

/**
 * The backend's own report, bounded in time: a hung scheduler must not hang the endpoint an
 * operator opens to find out that the scheduler hangs.
 */
export async function backendDiagnostics(deps: ApiDeps): Promise<BackendDiagnostics> {
  const timeoutMs = deps.diagnosticsTimeoutMs ?? DEFAULT_DIAGNOSTICS_TIMEOUT_MS;
  const answer = deps.backend.diagnostics().catch(
    (error: unknown): BackendDiagnostics => ({
      backend: deps.backend.name,
      healthy: false,
      message: `diagnostics failed: ${String(error)}`,
      calls: {},
    }),
  );
  return withDeadline(
    answer,
    timeoutMs,
    (): BackendDiagnostics => ({
      backend: deps.backend.name,
      healthy: false,
      message: `no answer from the backend within ${timeoutMs} ms`,
      calls: {},
    }),
  );
}

export interface BackendHealthReading {
  /** The backend's own report (calls, orphans): its `healthy` is a witness, not the verdict. */
  readonly report: BackendDiagnostics;
  readonly verdict: BackendHealthVerdict;
}

/** Both witnesses, asked now, and the verdict on them. */
export async function readBackendHealth(deps: ApiDeps): Promise<BackendHealthReading> {
  const report = await backendDiagnostics(deps);
  return { report, verdict: backendHealthVerdict(report, deps.reconciler.backendHealth()) };
}
