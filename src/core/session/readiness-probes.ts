/**
 * What the workers are asked to prove readiness: every rank reads back the workspace
 * marker the preparer wrote (WORKSPACE_VISIBLE), and rank 0's kernel evaluates `1+1`
 * (KERNEL_RESPONSIVE). Each answers a ProbeResult; the loop (readiness.ts) remembers it.
 */

import type { WorkerResponse } from "../../wire/worker-protocol.ts";
import type { Allocation, Workload } from "../models.ts";
import type { SessionAttempts } from "../ports/session-attempts.ts";
import type { RequestOutcome, WorkerGateway } from "../ports/worker-gateway.ts";
import type { ProbeResult } from "./readiness-conditions.ts";

export interface ReadinessProbes {
  workspace(workload: Workload, a: Allocation, ranks: number): Promise<ProbeResult>;
  kernel(a: Allocation): Promise<ProbeResult>;
}

export function createReadinessProbes(options: {
  readonly gateway: Pick<WorkerGateway, "request">;
  readonly attempts: Pick<SessionAttempts, "workspaceMarker">;
  /** Per probe_workspace request. */
  readonly probeTimeoutMs: number;
  /** For the `1+1` probe, which may include the kernel's start. */
  readonly kernelTimeoutMs: number;
}): ReadinessProbes {
  const { gateway, attempts, probeTimeoutMs, kernelTimeoutMs } = options;

  async function probeWorkspace(
    workload: Workload,
    a: Allocation,
    ranks: number,
  ): Promise<ProbeResult> {
    const { path, expect } = attempts.workspaceMarker(workload.id, a.id, a.epoch);
    const answers = await Promise.all(
      Array.from({ length: ranks }, (_, rank) =>
        gateway.request(
          a.id,
          a.epoch,
          rank,
          { kind: "probe_workspace", path, expect },
          probeTimeoutMs,
        ),
      ),
    );
    const problems: string[] = [];
    answers.forEach((outcome, rank) => {
      if (outcome.kind !== "Answered") {
        problems.push(`rank ${rank}: ${describeFailure(outcome)}`);
      } else if (!outcome.response.found) {
        problems.push(
          outcome.response.content === null
            ? `rank ${rank} cannot read ${path}`
            : `rank ${rank} reads a different marker at ${path}`,
        );
      }
    });
    if (problems.length > 0) {
      return {
        ok: false,
        message: `the workspace marker was not confirmed: ${problems.join("; ")}`,
      };
    }
    return {
      ok: true,
      message: `${ranks === 1 ? "the worker" : `all ${ranks} workers`} read the workspace marker at ${path}`,
    };
  }

  async function probeKernel(a: Allocation): Promise<ProbeResult> {
    const started = performance.now();
    const outcome = await gateway.request(
      a.id,
      a.epoch,
      0,
      { kind: "exec", code: "1+1" },
      kernelTimeoutMs,
    );
    if (outcome.kind !== "Answered") {
      return { ok: false, message: `1+1 was not evaluated: ${describeFailure(outcome)}` };
    }
    const r = outcome.response;
    const value = r.result?.["text/plain"] ?? null;
    if (r.status !== "OK" || value !== "2") {
      return {
        ok: false,
        message: `1+1 evaluated to ${JSON.stringify(value)} (status ${r.status}${r.error ? `: ${r.error.traceback.slice(0, 200)}` : ""})`,
      };
    }
    return {
      ok: true,
      message: `1+1 evaluated to 2 in ${Math.round(performance.now() - started)} ms`,
    };
  }

  return { workspace: probeWorkspace, kernel: probeKernel };
}

type RequestFailure = Exclude<RequestOutcome<WorkerResponse>, { readonly kind: "Answered" }>;

function describeFailure(outcome: RequestFailure): string {
  switch (outcome.kind) {
    case "NotConnected":
      return "not connected";
    case "TimedOut":
      return "no answer in time";
    case "Disconnected":
      return "the connection was lost";
    case "WorkerError":
      return `the worker could not serve it: ${outcome.message}`;
    case "TooLarge":
      return `the request is too large (${outcome.bytes} bytes)`;
    default: {
      const unreachable: never = outcome;
      return `unexpected outcome ${JSON.stringify(unreachable)}`;
    }
  }
}
