// The composition root: where backends are chosen and wired, and the only code that imports
// a backend package. Of it, only the backend registry (backends.ts) may name the scheduler
// (INV-2; the leak guard exempts that one file and the scheduler's own package by path).

// Internal modes of the binary that belong to a backend: the CLI registry reaches them only
// through here, so no module outside the composition root imports a backend package.
export { superviseCommand } from "../../../adapters/backend-local/supervise-command.ts";
export {
  BACKENDS,
  type CheckedProfile,
  type ConfigPreflight,
  checkClusterConfig,
  createBackend,
  DEFAULT_BACKEND,
  migrateBackendRecords,
  preflightClusterConfig,
} from "./backends.ts";
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
