/**
 * The worker's side of an environment that cannot run on its node: checked once, before the
 * first dial (environment-check.ts), and reported on the first connection in place of a
 * kernel (the session then ends naming what is missing and where).
 */
import { hostname } from "node:os";
import type { Timers } from "../../lib/clock.ts";
import { pause } from "../../lib/clock.ts";
import { parseGatewayMessage } from "../../wire/worker-protocol.ts";
import { type CheckedEnvironment, environmentProblem } from "./environment-check.ts";
import type { Link } from "./gateway-link.ts";
import type { WorkerExit, WorkerOptions } from "./worker.ts";

/** How long the gateway may take to answer the report. */
const REPORT_ANSWER_MS = 5000;

/** What keeps the session's environment from running here, or null (or none to check). */
export function checkEnvironment(
  options: Pick<WorkerOptions, "environmentName" | "python" | "environment" | "node"> & {
    readonly timers: Timers;
  },
): Promise<string | null> {
  if (options.environmentName === undefined) return Promise.resolve(null);
  const environment: CheckedEnvironment = {
    name: options.environmentName,
    python: options.python,
    prefix: options.environment?.prefix ?? null,
    setupLines: options.environment?.setupLines ?? [],
  };
  // Logged when the worker exits with it (worker-command.ts), for the job's log.
  return environmentProblem(environment, options.node ?? hostname(), { timers: options.timers });
}

/**
 * Tells the gateway why no kernel will run here, and waits (bounded) for its answer, `stop`,
 * before closing: our own close is immediate, and the job's end could otherwise be seen
 * before the gateway read the report (the session would then end "exit code 1").
 */
export async function reportUnavailable(
  link: Link,
  message: string,
): Promise<Extract<WorkerExit, { readonly kind: "EnvironmentUnavailable" }>> {
  const answered = new AbortController();
  link.attach({
    onFrame: (frame) => {
      if (parseGatewayMessage(frame)?.kind === "stop") answered.abort();
    },
    onClose: () => answered.abort(),
  });
  link.send({ kind: "environment_unavailable", message: message.slice(0, 1000) });
  await pause(REPORT_ANSWER_MS, answered.signal);
  link.end();
  return { kind: "EnvironmentUnavailable", message };
}
