// Contracts only. Importing this module must not pull in any implementation (a leak-guard
// claim, checked on the import graph): backends are imported by composition code.

export * from "./attempt-preparer.ts";
export * from "./models.ts";
export * from "./ports.ts";
export * from "./sandbox.ts";
