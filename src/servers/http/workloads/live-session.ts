/**
 * The checks every session call shares (exec, interrupt, restart, over HTTP and MCP): a
 * live SESSION on a daemon with sessions; and the session engine's refusals as problems.
 * One place, so both doors refuse with the same words.
 */
import type { Workload } from "../../../core/models.ts";
import { isTerminal } from "../../../core/models.ts";
import type {
  ExecOutcome,
  InterruptOutcome,
  RestartOutcome,
  SessionService,
} from "../../../core/session/session-port.ts";
import type { ApiDeps } from "../deps.ts";
import { conflict, notFound } from "../problem.ts";

export function mustBeLiveSession(
  deps: ApiDeps,
  workload: Workload,
): { workload: Workload; sessions: SessionService } {
  if (!deps.sessions) {
    throw conflict(
      "sessions-disabled",
      "Sessions disabled",
      "sessions are not enabled on this daemon",
    );
  }
  if (workload.kind !== "SESSION") {
    throw conflict(
      "not-a-session",
      "Not a session",
      `workload ${workload.id} is a ${workload.kind}, not a SESSION`,
    );
  }
  if (isTerminal(workload.phase)) {
    throw conflict(
      "workload-ended",
      "Workload ended",
      `workload ${workload.id} is ${workload.phase}`,
    );
  }
  return { workload, sessions: deps.sessions };
}

/** A session call's refusals (exec and interrupt answer alike), as problems. */
export function sessionFailure(
  workload: Workload,
  outcome: Exclude<ExecOutcome | InterruptOutcome | RestartOutcome, { readonly kind: "Ok" }>,
): never {
  switch (outcome.kind) {
    case "NotReady":
      throw conflict("session-not-ready", "Session not ready", outcome.message);
    case "NotFound":
      throw notFound(`no session for workload ${JSON.stringify(workload.id)}`);
    default: {
      const never: never = outcome;
      throw new Error(`unhandled session outcome ${JSON.stringify(never)}`);
    }
  }
}
