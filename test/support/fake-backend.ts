/**
 * The one fake backend of the tests, and the capabilities a fake may carry. The simulated
 * backend (simulated-backend.ts) builds on the same capability type.
 */
import type { ResourceProfile, SubmissionToken } from "../../src/core/models.ts";
import {
  type AllocationBackend,
  type BackendCapabilities,
  type BackendDiagnostics,
  type CancelResult,
  type FindResult,
  NO_CAPABILITIES,
  type ObserveResult,
  type SubmitResult,
} from "../../src/core/ports/allocation-backend.ts";

export const PROFILES: readonly ResourceProfile[] = [
  {
    name: "default",
    description: "This machine",
    kinds: ["BATCH"],
    resources: { nodes: 1, cpus: 2, gpus: 0, memoryMb: null, timeLimitSeconds: 3600 },
  },
  {
    name: "interactive",
    description: "Sessions",
    kinds: ["SESSION", "BATCH"],
    resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: 1024, timeLimitSeconds: null },
  },
];

/**
 * The capabilities a fake carries, as fields of the port's record (the rest null). Typed, not
 * cast `as never`, so a fake breaks at compile time when a capability changes.
 */
export type OptionalCapabilities = Partial<BackendCapabilities>;

/** The port's calls a fake may replace. */
export type FakeOverrides = Partial<Omit<AllocationBackend, "capabilities">> & {
  readonly capabilities?: OptionalCapabilities;
};

/**
 * A backend the code under test may only ask for its profiles and diagnostics (the API,
 * admission, the steps rule, the SESSION preparer); any job-moving call fails loudly and is
 * recorded in `calls`. `overrides` replace any operation, and `overrides.capabilities` fills
 * fields of the capability record, typed.
 * The reconciler's tests drive jobs and use the simulated backend (simulated-backend.ts),
 * which carries the same capabilities through its `capabilities` option.
 */
export function fakeBackend(
  overrides: FakeOverrides = {},
): AllocationBackend & { readonly calls: string[] } {
  const calls: string[] = [];
  const refuse = (what: string) => {
    calls.push(what);
    throw new Error(`the code under test must not call backend.${what}`);
  };
  return {
    name: "fake",
    calls,
    profiles: () => PROFILES,
    submit: async (): Promise<ReadonlyMap<SubmissionToken, SubmitResult>> => refuse("submit"),
    observe: async (): Promise<ObserveResult> => refuse("observe"),
    cancel: async (): Promise<ReadonlyMap<string, CancelResult>> => refuse("cancel"),
    findByToken: async (): Promise<ReadonlyMap<SubmissionToken, FindResult>> =>
      refuse("findByToken"),
    diagnostics: async (): Promise<BackendDiagnostics> => ({
      backend: "fake",
      healthy: true,
      message: "fine",
      calls: { observe: 3 },
    }),
    ...overrides,
    capabilities: { ...NO_CAPABILITIES, ...overrides.capabilities },
  };
}
