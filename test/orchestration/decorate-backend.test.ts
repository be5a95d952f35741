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
import type { ExternalHandle, SubmissionToken } from "../../src/core/models.ts";
import type {
  AllocationBackend,
  BackendWith,
  CapabilityName,
  ObservationCursor,
  ObservationTarget,
} from "../../src/core/ports/allocation-backend.ts";
import type { Sandbox } from "../../src/core/sandbox.ts";
import { silentLog } from "../../src/lib/log.ts";

const ALL_CAPABILITIES: readonly CapabilityName[] = [
  "tasks",
  "changes",
  "terminalFacts",
  "sessionIsolation",
  "launchSandbox",
  "batchGate",
  "jobEnv",
];

type FullBackend = BackendWith<CapabilityName>;

/** A backend with every capability; each call is recorded by method name. */
function fullBackend(calls: string[]): FullBackend {
  return {
    name: "full",
    profiles: () => [],
    submit: async () => new Map(),
    observe: async () => ({ kind: "Observed", observations: new Map() }),
    cancel: async () => new Map(),
    findByToken: async () => new Map(),
    diagnostics: async () => ({ backend: "full", healthy: true, message: "", calls: {} }),
    capabilities: {
      tasks: {
        runTask: async () => {
          calls.push("runTask");
          return { kind: "Completed", exitCode: 0, stdout: "", stderr: "" };
        },
      },
      terminalFacts: {
        pendingTerminalFacts: async () => {
          calls.push("pendingTerminalFacts");
          return [{ token: "t" as SubmissionToken }];
        },
        acknowledgeTerminal: async () => {
          calls.push("acknowledgeTerminal");
        },
      },
      sessionIsolation: {
        verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
      },
      launchSandbox: { launchesSandboxed: () => true },
      batchGate: { batchRefusal: () => null },
      jobEnv: {
        jobEnvRefusals: (env) => {
          calls.push("jobEnvRefusals");
          return Object.keys(env).map((name) => ({ name, message: `${name} is refused` }));
        },
      },
      changes: {
        observeChanges: async () => {
          calls.push("observeChanges");
          return {
            kind: "Observed",
            observations: new Map(),
            changes: [],
            cursor: "c" as ObservationCursor,
          };
        },
      },
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
        pending: () => false,
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
    for (const name of ALL_CAPABILITIES) expect(decorated.capabilities[name]).not.toBeNull();
    // Carried, not just present: the acknowledger's calls reach the base.
    const facts = decorated.capabilities.terminalFacts;
    if (facts === null) throw new Error("unreachable");
    expect(await facts.pendingTerminalFacts()).toEqual([{ token: "t" as SubmissionToken }]);
    await facts.acknowledgeTerminal("t" as SubmissionToken);
    expect(calls).toEqual(["pendingTerminalFacts", "acknowledgeTerminal"]);
  });

  test("a capability the base lacks is not invented", () => {
    const full = fullBackend([]);
    const bare: AllocationBackend = {
      ...full,
      capabilities: { ...full.capabilities, tasks: null, terminalFacts: null },
    };
    const decorated = decorateBackend(bare, {});
    expect(decorated.capabilities.tasks).toBeNull();
    expect(decorated.capabilities.terminalFacts).toBeNull();
    expect(decorated.capabilities.sessionIsolation).not.toBeNull();
  });

  test("a feed that would bypass an overridden observe is not carried", async () => {
    const calls: string[] = [];
    const rewritten = decorateBackend(fullBackend(calls), {
      observe: async () => ({ kind: "Unavailable", message: "rewritten" }) as const,
    });
    expect(rewritten.capabilities.changes).toBeNull();
    const both = decorateBackend(
      fullBackend(calls),
      { observe: async () => ({ kind: "Unavailable", message: "rewritten" }) as const },
      { changes: { observeChanges: async () => ({ kind: "CursorExpired" }) as const } },
    );
    expect(await both.capabilities.changes.observeChanges(null, [])).toEqual({
      kind: "CursorExpired",
    });
    expect(calls).toEqual([]);
  });

  test("an override replaces the base's capability", async () => {
    const decorated = decorateBackend(
      fullBackend([]),
      {},
      {
        sessionIsolation: {
          verifySessionIsolation: async () => ({ kind: "Unverified", message: "off" }) as const,
        },
      },
    );
    expect(await decorated.capabilities.sessionIsolation.verifySessionIsolation()).toEqual({
      kind: "Unverified",
      message: "off",
    });
  });
});

const TARGET: ObservationTarget = {
  allocationId: "a-1",
  token: "t" as SubmissionToken,
  handle: "h-1" as ExternalHandle,
};

describe("switchingToSandbox: steps follow the current verdict", () => {
  test("a step runs through the sandboxed backend while sandboxing, the plain one otherwise", async () => {
    // Guards the step's routing: a step that never reached a runner would fail every
    // `steps` call of a job on this backend ("steps are not available").
    const plainCalls: string[] = [];
    const sandboxedCalls: string[] = [];
    let sandboxing = true;
    const decorated = switchingToSandbox({
      backend: fullBackend([]),
      plain: fullBackend(plainCalls),
      sandboxed: fullBackend(sandboxedCalls),
      sandboxing: () => sandboxing,
      pending: () => false,
      verify: async () => ({ kind: "Verified", mechanism: "test" }),
    });
    const tasks = decorated.capabilities.tasks;
    if (tasks === null) throw new Error("the base's steps were dropped");
    const run = () => tasks.runTask(TARGET, ["true"], { timeoutMs: 1_000 });
    expect(await run()).toMatchObject({ kind: "Completed", exitCode: 0 });
    expect(sandboxedCalls).toEqual(["runTask"]);
    sandboxing = false;
    expect(await run()).toMatchObject({ kind: "Completed", exitCode: 0 });
    expect(plainCalls).toEqual(["runTask"]);
  });
});
