/**
 * The list of backends (`openai4s serve --backend NAME`). A backend is one folder under
 * src/adapters/ whose `plugin.ts` declares it (core/ports/backend-plugin.ts) and one line
 * here: `serve --help`, the validation of --backend, the daemon's settings, `check-config`,
 * `restore` and the guards (test/support/leak-guard.ts, scheduler-calls.ts) all read this
 * list. It imports the plugins and the core only: the flag parser and config.ts read it, so
 * it must not reach back into the composition (the ten-file import circle it once closed).
 * The one file outside the backends' folders that names the scheduler (INV-2: the leak guard
 * exempts it by path), because it is where backends are listed.
 */
import { localBackendPlugin } from "../../../adapters/backend-local/plugin.ts";
import { slurmBackendPlugin } from "../../../adapters/backend-slurm/plugin.ts";
import type { StateLayout } from "../../../core/layout.ts";
import { type RegisteredBackend, registerBackend } from "../../../core/ports/backend-plugin.ts";

export const BACKENDS: readonly RegisteredBackend[] = [
  registerBackend(localBackendPlugin),
  registerBackend(slurmBackendPlugin),
];

export const DEFAULT_BACKEND = localBackendPlugin.name;

/** The backend of that name in `backends`; undefined for an unknown name. */
export function backendNamed(
  name: string,
  backends: readonly RegisteredBackend[] = BACKENDS,
): RegisteredBackend | undefined {
  return backends.find((b) => b.name === name);
}

/**
 * The state-dir split (issue 8) moved the workloads' files from `fromPrefix` to `toPrefix`:
 * each backend's durable records that name paths are rewritten to follow. Only a backend
 * with restore helpers keeps such records; a cluster's running jobs follow the rename by inode.
 */
export function migrateBackendRecords(
  layout: StateLayout,
  fromPrefix: string,
  toPrefix: string,
  backends: readonly RegisteredBackend[] = BACKENDS,
): void {
  for (const backend of backends) {
    backend.restore?.rewriteRecordPaths(layout.backendDir(backend.name), fromPrefix, toPrefix);
  }
}
