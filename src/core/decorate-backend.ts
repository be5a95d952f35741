/**
 * One way to wrap a backend: its calls forwarded, `methods` on top, and its capability record
 * carried as a value with `capabilities` on top, so a capability the wrapper did not think of
 * is never lost (three wrappers once forwarded methods one by one and dropped one).
 *
 * One rule is kept here rather than in each wrapper: a wrapper that rewrites `observe` (the
 * public messages) and not the change feed would be bypassed, since the reconciler asks the
 * feed; such a wrapper loses `changes` (full ticks, the slow but rewritten path) unless it
 * gives its own.
 */
import type { AllocationBackend, BackendCapabilities } from "./ports/allocation-backend.ts";

/** The calls of the port a wrapper may replace. */
export type BackendMethods = Omit<AllocationBackend, "name" | "capabilities">;

export function decorateBackend<
  B extends AllocationBackend,
  C extends Partial<BackendCapabilities> = Record<never, never>,
>(
  base: B,
  methods: Partial<BackendMethods>,
  // `& Partial<…>` types the functions written in the call; NoInfer below keeps C what the
  // call gives, never what the caller's declared result would like it to be.
  capabilities?: C & Partial<BackendCapabilities>,
): NoInfer<B & { readonly capabilities: B["capabilities"] & C }> {
  const changes =
    methods.observe !== undefined && capabilities?.changes === undefined
      ? null
      : base.capabilities.changes;
  const forwarded: AllocationBackend = {
    name: base.name,
    profiles: () => base.profiles(),
    submit: (requests) => base.submit(requests),
    observe: (targets) => base.observe(targets),
    cancel: (targets) => base.cancel(targets),
    findByToken: (tokens) => base.findByToken(tokens),
    diagnostics: () => base.diagnostics(),
    capabilities: { ...base.capabilities, changes, ...capabilities },
  };
  // The one cast: B is the port with a narrower record (a backend's type adds no members),
  // and the record above is B's with C on top.
  return { ...forwarded, ...methods } as B & { readonly capabilities: B["capabilities"] & C };
}
