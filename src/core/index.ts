// The core holds the rules (admission, the reconciler, readiness, presence, ownership,
// isolation policy) and the ports they need; it does no I/O. This index re-exports only its
// contracts (models, the backend port, the preparer and sandbox shapes): importing it must
// not pull in any implementation (a leak-guard claim, checked on the import graph), so an
// adapter can name the types it implements without loading the rules.

export * from "./attempt-preparer.ts";
export * from "./models.ts";
export * from "./ports/allocation-backend.ts";
export * from "./sandbox.ts";
