// The composition root: where backends are chosen and wired. The only code outside
// src/orchestration/slurm/ that may name the scheduler (INV-2; the leak guard exempts this
// folder by path), and the only code that imports a backend package.

// Internal modes of the binary that belong to a backend: the CLI registry reaches them only
// through here, so no module outside the composition root imports a backend package.
export { superviseCommand } from "../orchestration/local/supervise-command.ts";
export { BACKENDS, createBackend, DEFAULT_BACKEND, migrateBackendRecords } from "./backends.ts";
export {
  type CheckedProfile,
  type ConfigPreflight,
  checkClusterConfig,
  preflightClusterConfig,
} from "./cluster-config.ts";
export type {
  BackendContext,
  BackendCreation,
  BackendEntry,
  BackgroundService,
} from "./context.ts";
export { type Core, composeCore } from "./core.ts";
export {
  cancelUnknownJobs,
  setAsideDir,
  setAsideEndedUnknownJobs,
  type UnknownJob,
  unknownRunningJobs,
  waitUntilEnded,
} from "./restore-unknown-jobs.ts";
export { CLUSTER_ISOLATION_RETRY_MS } from "./session-isolation.ts";
