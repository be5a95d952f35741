// The Slurm backend package: imported by composition code only (src/composition/),
// never by the orchestration core. Re-exports only.
export * from "./backend.ts";
export * from "./batch-script.ts";
export * from "./broker.ts";
export * from "./parse.ts";
export * from "./profiles.ts";
export * from "./state-table.ts";
