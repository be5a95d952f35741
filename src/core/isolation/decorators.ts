/**
 * The isolation answers a backend is wrapped in by the composition root's policy, none of
 * which depends on which backend it is: a fixed refusal, a verdict kept fresh in the
 * background, and the switch from plain to sandboxed launches once the sandbox is seen
 * working. All go through decorateBackend, so no capability of the backend is lost.
 */

import type { Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { decorateBackend } from "../decorate-backend.ts";
import type {
  AllocationBackend,
  BackendWith,
  IsolationVerdict,
  TaskRunner,
} from "../ports/allocation-backend.ts";
import type { Sandbox } from "../sandbox.ts";
import { type BackgroundVerifier, createBackgroundVerifier } from "./background-verifier.ts";

/** The backend, answering the isolation question with why not (never Verified). */
export function withoutSessionIsolation(
  backend: AllocationBackend,
  message: string,
): BackendWith<"sessionIsolation"> {
  return decorateBackend(
    backend,
    {},
    {
      sessionIsolation: {
        verifySessionIsolation: async (): Promise<IsolationVerdict> => ({
          kind: "Unverified",
          message,
        }),
      },
    },
  );
}

/**
 * The backend's isolation answer, re-verified in the background: the sandbox's own
 * verify() probes again when its cache expires, which put a bwrap run (up to 10 s) inside
 * whichever HTTP request or reconciler tick asked next (issue 8). Seeded with the verdict of
 * the start-up check, so the daemon never answers "not verified yet" once it listens.
 */
export function verifiedInBackground(options: {
  readonly backend: AllocationBackend;
  readonly sandbox: Sandbox;
  readonly log: Log;
  readonly intervalMs: number;
  /** When the re-verifications run (tests: never, or by hand); default: timers. */
  readonly schedule?: Timers;
}): {
  readonly backend: BackendWith<"sessionIsolation">;
  /** Stop it with the daemon: its timer must not outlive the backend. */
  readonly verifier: BackgroundVerifier;
} {
  const { sandbox } = options;
  const verifier = createBackgroundVerifier({
    probe: () => sandbox.verify(),
    log: options.log,
    seed: { kind: "Verified", mechanism: sandbox.mechanism },
    verifiedIntervalMs: options.intervalMs,
    retryIntervalMs: options.intervalMs,
    ...(options.schedule === undefined ? {} : { schedule: options.schedule }),
  });
  verifier.start();
  const backend = decorateBackend(
    options.backend,
    {},
    {
      sessionIsolation: {
        verifySessionIsolation: async (): Promise<IsolationVerdict> => verifier.current(),
      },
    },
  );
  return { backend, verifier };
}

/**
 * One backend that submits through `plain` until `sandboxing()` turns true, then through
 * `sandboxed`; observation, cancellation and the rest go to `backend` itself, which both
 * wrap. Steps follow the same switch, so a step runs wrapped like the allocations of the
 * moment.
 */
export function switchingToSandbox(options: {
  readonly backend: AllocationBackend;
  readonly plain: AllocationBackend;
  readonly sandboxed: AllocationBackend;
  sandboxing(): boolean;
  /** No conclusive verdict yet: work needing the sandbox waits (mounts-await-verdict.ts). */
  pending(): boolean;
  verify(): Promise<IsolationVerdict>;
}): BackendWith<"sessionIsolation" | "launchSandbox"> {
  const { backend, plain, sandboxed, sandboxing } = options;
  const current = (): AllocationBackend => (sandboxing() ? sandboxed : plain);
  const tasks: TaskRunner | null =
    backend.capabilities.tasks === null
      ? null
      : {
          runTask: (target, command, taskOptions) => {
            const chosen = current().capabilities.tasks;
            if (chosen !== null) return chosen.runTask(target, command, taskOptions);
            // Unreachable (both wrappers carry the backend's tasks); never unwrapped.
            return Promise.resolve({ kind: "Refused", message: "steps are not available" });
          },
        };
  return decorateBackend(
    backend,
    { submit: (requests) => current().submit(requests) },
    {
      tasks,
      launchSandbox: { launchesSandboxed: () => sandboxing(), sandboxPending: options.pending },
      sessionIsolation: { verifySessionIsolation: () => options.verify() },
    },
  );
}
