/**
 * One way to wrap a backend. A wrapper that forwards the port's methods one by one drops
 * every optional capability it did not think of: three did, and none forwarded
 * TerminalAllocationAcknowledger, so the sweep would have stopped silently for any backend
 * that acknowledged terminal facts behind one. Here the base's capabilities are found by
 * the same type guards the core asks, and each one found is carried unless overridden.
 */
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
  reportsChanges,
  type SessionIsolationProvider,
  type TaskRunner,
  type TerminalAllocationAcknowledger,
} from "./ports.ts";

/** Every method a decorator may replace or add: the port and each optional capability. */
export type BackendOverrides = Partial<
  Omit<AllocationBackend, "name"> &
    TaskRunner &
    TerminalAllocationAcknowledger &
    SessionIsolationProvider &
    LaunchSandboxReporter &
    BatchPlacementGate &
    JobEnvironmentPolicy &
    ChangeReportingBackend
>;

/**
 * `base`'s port and every capability its guards find, each method calling `base`, then
 * `overrides` on top. A capability the base lacks can be added by overriding all of its
 * methods; one the base has is never lost.
 */
export function decorateBackend<B extends AllocationBackend, O extends BackendOverrides>(
  base: B,
  overrides: O,
): B & O {
  const carried: Record<string, unknown> = {
    name: base.name,
    profiles: () => base.profiles(),
    submit: (requests: Parameters<AllocationBackend["submit"]>[0]) => base.submit(requests),
    observe: (targets: Parameters<AllocationBackend["observe"]>[0]) => base.observe(targets),
    cancel: (targets: Parameters<AllocationBackend["cancel"]>[0]) => base.cancel(targets),
    findByToken: (tokens: Parameters<AllocationBackend["findByToken"]>[0]) =>
      base.findByToken(tokens),
    diagnostics: () => base.diagnostics(),
  };
  if (isTaskRunner(base)) {
    const runner: TaskRunner = { runTask: (...args) => base.runTask(...args) };
    Object.assign(carried, runner);
  }
  if (isTerminalAllocationAcknowledger(base)) {
    const acknowledger: TerminalAllocationAcknowledger = {
      pendingTerminalFacts: () => base.pendingTerminalFacts(),
      acknowledgeTerminal: (token) => base.acknowledgeTerminal(token),
    };
    Object.assign(carried, acknowledger);
  }
  if (isSessionIsolationProvider(base)) {
    const provider: SessionIsolationProvider = {
      verifySessionIsolation: () => base.verifySessionIsolation(),
    };
    Object.assign(carried, provider);
  }
  if (isLaunchSandboxReporter(base)) {
    const reporter: LaunchSandboxReporter = { launchesSandboxed: () => base.launchesSandboxed() };
    Object.assign(carried, reporter);
  }
  // A decorator that rewrites `observe` (public messages) and not `observeChanges` would be
  // bypassed by the carried feed: the reconciler asks the feed, and the rewrite would never
  // run. Such a decorator loses the capability (the caller then observes everything, the
  // slow path but the rewritten one) until it rewrites the feed too.
  if (reportsChanges(base) && (overrides.observe === undefined || "observeChanges" in overrides)) {
    const feed: ChangeReportingBackend = {
      observeChanges: (cursor, targets) => base.observeChanges(cursor, targets),
    };
    Object.assign(carried, feed);
  }
  if (canRefuseBatch(base)) {
    const gate: BatchPlacementGate = { batchRefusal: () => base.batchRefusal() };
    Object.assign(carried, gate);
  }
  if (isJobEnvironmentPolicy(base)) {
    const policy: JobEnvironmentPolicy = { jobEnvRefusals: (env) => base.jobEnvRefusals(env) };
    Object.assign(carried, policy);
  }
  // The one cast: the guards above found each capability of B, and B is the port plus
  // capabilities (a backend's type never adds other members), so this object is a B.
  return { ...carried, ...overrides } as unknown as B & O;
}
