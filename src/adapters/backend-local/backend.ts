/**
 * The local backend: jobs run on this machine, each as its own process group under a
 * detached supervisor (`openai4s __supervise`). Every install has it, so INV-8 reconciliation
 * is implemented for real here: the token's record is durable before any process starts,
 * and `findByToken` after a daemon restart answers from that record — the running job, its
 * exit record, or a definite absence.
 *
 * The record directory is the queue. A record that no supervisor has claimed yet (the daemon
 * died between writing it and starting the supervisor, or the supervisor is still starting)
 * is QUEUED, and the next look at it starts a supervisor; supervisors claim with link(2), so
 * however many get started for one record, the job runs once.
 *
 * A job array is one record and one token like any job (findByToken finds the array, never
 * an element); its one supervisor runs the elements, at most `maxConcurrent` at once, and
 * observe sums them up (array-supervisor.ts, array-records.ts).
 *
 * Every launch goes through a LaunchWrapper (src/core/sandbox.ts): the job's
 * variables are applied inside it, never given to a host-side process, and a daemon running
 * as root runs jobs as the RunAs uid. It does not isolate sessions by itself. Given a
 * Sandbox it wraps every launch (BATCH included) in it and only then does its capability
 * record hold `sessionIsolation`; without one that is null, so admission refuses SESSION
 * before anything is written.
 */
import { randomBytes } from "node:crypto";
import { createChangeFeed } from "../../core/change-feed.ts";
import { decorateBackend } from "../../core/decorate-backend.ts";
import { type CancelResult, NO_CAPABILITIES } from "../../core/ports/allocation-backend.ts";
import type { LaunchWrapper, Sandbox } from "../../core/sandbox.ts";
import {
  type IsolatingLocalBackend,
  LOCAL_BACKEND_NAME,
  type LocalBackend,
  type LocalBackendOptions,
} from "./backend-options.ts";
import { cancelOne } from "./cancel.ts";
import { createLocalContext } from "./local-context.ts";
import { localDiagnostics } from "./local-diagnostics.ts";
import { findTokens, observeAll, observeChangesWith } from "./observe.ts";
import { runTaskOne } from "./run-task.ts";
import { submitAll } from "./submit.ts";
import { acknowledgeTerminal, pendingTerminalFacts } from "./terminal-facts.ts";

export function createLocalBackend(
  options: LocalBackendOptions & { readonly sandbox: Sandbox },
): IsolatingLocalBackend;
export function createLocalBackend(options: LocalBackendOptions): LocalBackend;
export function createLocalBackend(options: LocalBackendOptions): LocalBackend {
  const base = createBackend(options);
  const sandbox = options.sandbox;
  if (sandbox === undefined) return base;
  return decorateBackend(
    base,
    {},
    { sessionIsolation: { verifySessionIsolation: () => sandbox.verify() } },
  );
}

/** The port, each method one of the files beside this one, all over one shared context. */
function createBackend(options: LocalBackendOptions): LocalBackend {
  const wrapper: LaunchWrapper | undefined = options.sandbox ?? options.plainLaunch;
  // A caller's bug, not a condition to answer: every builder hands one or the other in.
  if (wrapper === undefined) throw new Error("a local backend needs a sandbox or a plainLaunch");
  const ctx = createLocalContext(options, wrapper);
  // Random per process: a cursor from before a restart is expired, never trusted.
  const feed = createChangeFeed(randomBytes(8).toString("hex"));
  return {
    name: LOCAL_BACKEND_NAME,
    profiles: () => ctx.profileList,
    async submit(requests) {
      ctx.count("submit");
      return submitAll(ctx, requests);
    },
    async observe(targets) {
      return observeAll(ctx, targets);
    },
    async cancel(targets) {
      ctx.count("cancel");
      const results = new Map<string, CancelResult>();
      for (const target of targets) {
        try {
          results.set(target.allocationId, cancelOne(ctx, target));
        } catch (error) {
          results.set(target.allocationId, { kind: "Unavailable", message: String(error) });
        }
      }
      return results;
    },
    async findByToken(tokens) {
      return findTokens(ctx, tokens);
    },
    async diagnostics() {
      return localDiagnostics(ctx);
    },
    capabilities: {
      ...NO_CAPABILITIES,
      tasks: {
        async runTask(target, command, taskOptions) {
          return runTaskOne(ctx, target, command, taskOptions.timeoutMs);
        },
      },
      changes: {
        async observeChanges(cursor, targets) {
          return observeChangesWith(ctx, feed, cursor, targets);
        },
      },
      terminalFacts: {
        async pendingTerminalFacts() {
          return pendingTerminalFacts(ctx);
        },
        async acknowledgeTerminal(token) {
          acknowledgeTerminal(ctx, token);
        },
      },
      launchSandbox: { launchesSandboxed: () => wrapper.sandboxed },
    },
  };
}
