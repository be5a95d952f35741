// The composition root: where backends are chosen and wired, and the only code that imports
// a backend package. Of it, only the list of backends (backends.ts) may name the scheduler
// (INV-2; the leak guard exempts that one file and the backends' own folders by path).

// Internal modes of the binary that belong to a backend: the CLI registry reaches them only
// through here, so no module outside the composition root imports a backend package.
export { superviseCommand } from "../../../adapters/backend-local/supervise-command.ts";
export { BACKENDS, backendNamed, DEFAULT_BACKEND, migrateBackendRecords } from "./backends.ts";
export type { BackendContext, BackendCreation, BackgroundService } from "./context.ts";
export { type Core, composeCore } from "./core.ts";
export { createBackend } from "./create-backend.ts";
export { CLUSTER_ISOLATION_RETRY_MS } from "./session-isolation.ts";
