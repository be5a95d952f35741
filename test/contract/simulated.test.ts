/**
 * The backend contract (test/support/backend-contract.ts) against the simulated backend the
 * reconciler's tests and benches run on: if the model stops behaving like the real backends,
 * every test built on it proves less than it says. The simulation runs nothing, so
 * `advance` plays each job's script: `sleep` runs until cancelled, `exit N` ends with N.
 */
import { isTerminal, mintSubmissionToken } from "../../src/core/models.ts";
import type { SubmitRequest } from "../../src/core/ports/allocation-backend.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { backendContract } from "../support/backend-contract.ts";
import { createSimulatedBackend } from "../support/simulated-backend.ts";

let next = 0;

function request(script: string): SubmitRequest {
  next += 1;
  const workloadId = `w-${next}`;
  const allocationId = `a-${next}`;
  return {
    allocationId,
    workloadId,
    workloadKind: "BATCH",
    token: mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n))),
    epoch: 1,
    profile: "default",
    name: "contract",
    launch: { kind: "COMMAND", command: ["/bin/sh", "-c", script], env: {} },
    timeLimitSeconds: null,
    allocationDir: `/nonexistent/${workloadId}/${allocationId}`,
    workspaceDir: `/nonexistent/${workloadId}`,
  };
}

/** The exit code a script ends with, or null for one that runs until cancelled. */
function exitOf(r: SubmitRequest): number | null {
  const script = r.launch.kind === "COMMAND" ? (r.launch.command[2] ?? "") : "";
  const m = /^exit (\d+)$/.exec(script);
  return m === null ? null : Number(m[1]);
}

backendContract({
  name: "simulated",
  capabilities: {
    tasks: false,
    changes: true,
    terminalFacts: true,
    sessionIsolation: false,
    launchSandbox: false,
    batchGate: false,
    jobEnv: false,
  },
  phaseTimeoutMs: 2_000,
  make() {
    const clock = manualClock();
    const sim = createSimulatedBackend({ clock, reportsChanges: true, acknowledger: true });
    return {
      backend: sim.backend,
      request,
      advance() {
        clock.advance(1000);
        sim.step();
        for (const job of sim.jobs()) {
          if (isTerminal(job.phase)) continue;
          if (job.phase === "QUEUED") sim.start(job.handle);
          const code = exitOf(job.request);
          if (code === null) continue;
          sim.finish(job.handle, {
            phase: code === 0 ? "COMPLETED" : "FAILED",
            reason: code === 0 ? "EXITED_ZERO" : "NONZERO_EXIT",
            exitCode: code,
          });
        }
      },
      async close() {},
    };
  },
});
