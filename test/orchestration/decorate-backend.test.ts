import { describe, expect, test } from "bun:test";
import { withPublicMessages } from "../../src/adapters/backend-slurm/public-messages.ts";
import {
  sandboxedBackend,
  wrappedBackend,
} from "../../src/adapters/isolation-bwrap/through-backend.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { decorateBackend } from "../../src/core/decorate-backend.ts";
import { gatedUnsandboxedBatch } from "../../src/core/isolation/batch-gate.ts";
import {
  switchingToSandbox,
  verifiedInBackground,
  withoutSessionIsolation,
} from "../../src/core/isolation/decorators.ts";
import { guardedByLiveAllocations } from "../../src/core/isolation/live-guard.ts";
import type { SubmissionToken } from "../../src/core/models.ts";
import {
  type AllocationBackend,
  type BatchPlacementGate,
  type ChangeReportingBackend,
  canRefuseBatch,
  isJobEnvironmentPolicy,
  isLaunchSandboxReporter,
  isSessionIsolationProvider,
  isTaskRunner,
  isTerminalAllocationAcknowledger,
  type JobEnvironmentPolicy,
  type LaunchSandboxReporter,
  type ObservationCursor,
  reportsChanges,
  type SessionIsolationProvider,
  type TaskRunner,
  type TerminalAllocationAcknowledger,
} from "../../src/core/ports.ts";
import type { Sandbox } from "../../src/core/sandbox.ts";
import { silentLog } from "../../src/lib/log.ts";

type FullBackend = AllocationBackend &
  TaskRunner &
  TerminalAllocationAcknowledger &
  SessionIsolationProvider &
  LaunchSandboxReporter &
  BatchPlacementGate &
  JobEnvironmentPolicy &
  ChangeReportingBackend;

/** A backend with every optional capability; each call is recorded by method name. */
function fullBackend(calls: string[]): FullBackend {
  return {
    name: "full",
    profiles: () => [],
    submit: async () => new Map(),
    observe: async () => ({ kind: "Observed", observations: new Map() }),
    cancel: async () => new Map(),
    findByToken: async () => new Map(),
    diagnostics: async () => ({ backend: "full", healthy: true, message: "", calls: {} }),
    runTask: async () => {
      calls.push("runTask");
      return { kind: "Completed", exitCode: 0, stdout: "", stderr: "" };
    },
    pendingTerminalFacts: async () => {
      calls.push("pendingTerminalFacts");
      return [{ token: "t" as SubmissionToken }];
    },
    acknowledgeTerminal: async () => {
      calls.push("acknowledgeTerminal");
    },
    verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
    launchesSandboxed: () => true,
    batchRefusal: () => null,
    jobEnvRefusals: (env) => {
      calls.push("jobEnvRefusals");
      return Object.keys(env).map((name) => ({ name, message: `${name} is refused` }));
    },
    observeChanges: async () => {
      calls.push("observeChanges");
      return {
        kind: "Observed",
        observations: new Map(),
        changes: [],
        cursor: "c" as ObservationCursor,
      };
    },
  };
}

const sandbox: Sandbox = {
  sandboxed: true,
  identities: fixedIdentities(null),
  mechanism: "test",
  wrap: (argv) => argv,
  prepare: () => null,
  verify: async () => ({ kind: "Verified", mechanism: "test" }),
};

const wrapOptions = {
  wrapper: sandbox,
  rankEnv: "RANK",
  baseEnv: {},
  locate: () => ({ allocationDir: "/nonexistent/a", workspaceDir: "/nonexistent/w" }),
  spoolDir: "/nonexistent",
  verify: async () => ({ kind: "Verified", mechanism: "test" }) as const,
};

const never = { after: () => () => {} };

const DECORATORS: readonly [string, (base: FullBackend) => AllocationBackend][] = [
  ["decorateBackend with no overrides", (b) => decorateBackend(b, {})],
  ["wrappedBackend", (b) => wrappedBackend(b, wrapOptions)],
  ["sandboxedBackend", (b) => sandboxedBackend(b, wrapOptions)],
  ["guardedByLiveAllocations", (b) => guardedByLiveAllocations(b, () => [])],
  ["withoutSessionIsolation", (b) => withoutSessionIsolation(b, "no")],
  [
    "verifiedInBackground",
    (b) =>
      verifiedInBackground({
        backend: b,
        sandbox,
        log: silentLog,
        intervalMs: 60_000,
        schedule: never,
      }).backend,
  ],
  [
    "switchingToSandbox",
    (b) =>
      switchingToSandbox({
        backend: b,
        plain: b,
        sandboxed: b,
        sandboxing: () => true,
        verify: async () => ({ kind: "Verified", mechanism: "test" }),
      }),
  ],
  ["withPublicMessages", (b) => withPublicMessages(b, { values: [] })],
  [
    "gatedUnsandboxedBatch",
    (b) => gatedUnsandboxedBatch(b, { jobsKeepDaemonUid: false, allowUnsandboxedBatch: false }),
  ],
];

describe("every backend decorator keeps every capability of its base", () => {
  test.each(DECORATORS)("%s", async (_name, decorate) => {
    const calls: string[] = [];
    const base = fullBackend(calls);
    const decorated = decorate(base);
    expect(isTaskRunner(decorated)).toBe(true);
    expect(isTerminalAllocationAcknowledger(decorated)).toBe(true);
    expect(isSessionIsolationProvider(decorated)).toBe(true);
    expect(isLaunchSandboxReporter(decorated)).toBe(true);
    expect(canRefuseBatch(decorated)).toBe(true);
    expect(isJobEnvironmentPolicy(decorated)).toBe(true);
    expect(reportsChanges(decorated)).toBe(true);
    // Carried, not just present: the acknowledger's calls reach the base.
    if (!isTerminalAllocationAcknowledger(decorated)) throw new Error("unreachable");
    expect(await decorated.pendingTerminalFacts()).toEqual([{ token: "t" as SubmissionToken }]);
    await decorated.acknowledgeTerminal("t" as SubmissionToken);
    expect(calls).toEqual(["pendingTerminalFacts", "acknowledgeTerminal"]);
  });

  test("a capability the base lacks is not invented", () => {
    const {
      runTask: _r,
      pendingTerminalFacts: _p,
      acknowledgeTerminal: _a,
      ...bare
    } = fullBackend([]);
    const decorated = decorateBackend(bare, {});
    expect(isTaskRunner(decorated)).toBe(false);
    expect(isTerminalAllocationAcknowledger(decorated)).toBe(false);
    expect(isSessionIsolationProvider(decorated)).toBe(true);
  });

  test("a feed that would bypass an overridden observe is not carried", async () => {
    const calls: string[] = [];
    const rewritten = decorateBackend(fullBackend(calls), {
      observe: async () => ({ kind: "Unavailable", message: "rewritten" }) as const,
    });
    expect(reportsChanges(rewritten)).toBe(false);
    const both = decorateBackend(fullBackend(calls), {
      observe: async () => ({ kind: "Unavailable", message: "rewritten" }) as const,
      observeChanges: async () => ({ kind: "CursorExpired" }) as const,
    });
    expect(reportsChanges(both)).toBe(true);
    expect(await both.observeChanges(null, [])).toEqual({ kind: "CursorExpired" });
    expect(calls).toEqual([]);
  });

  test("an override replaces the base's method", async () => {
    const decorated = decorateBackend(fullBackend([]), {
      verifySessionIsolation: async () => ({ kind: "Unverified", message: "off" }) as const,
    });
    expect(await decorated.verifySessionIsolation()).toEqual({
      kind: "Unverified",
      message: "off",
    });
  });
});
