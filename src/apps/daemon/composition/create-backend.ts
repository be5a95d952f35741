/**
 * Builds the chosen backend from its plugin: the daemon's context turned into the plugin's
 * (its own settings, the worker socket, the orphan sweep, the isolation policy), after the
 * checks every backend shares (the admin's extra read-only sandbox directories).
 */
import type { BackendCreation, RegisteredBackend } from "../../../core/ports/backend-plugin.ts";
import { BACKENDS, backendNamed } from "./backends.ts";
import type { BackendContext } from "./context.ts";
import { sandboxReadOnlyDirs } from "./sandbox-read-only.ts";
import { sessionIsolationKit } from "./session-isolation.ts";
import { workerSocketPath } from "./worker-socket.ts";

export async function createBackend(
  name: string,
  context: BackendContext,
  backends: readonly RegisteredBackend[] = BACKENDS,
): Promise<BackendCreation> {
  const plugin = backendNamed(name, backends);
  if (plugin === undefined) {
    return {
      kind: "ConfigError",
      message: `unknown backend "${name}" (known: ${backends.map((b) => b.name).join(", ")})`,
    };
  }
  const { layout, settings } = context;
  if (!Object.hasOwn(settings.backends, name)) {
    // config.ts reads every listed backend's settings; a list that differs is a wiring bug.
    throw new Error(`the settings of backend "${name}" were not parsed at start`);
  }
  // The admin's extra read-only sandbox directories; the state dir and spool are masked.
  const extra = sandboxReadOnlyDirs(settings.sandboxReadOnly, [layout.root, layout.spool]);
  if (extra.kind === "ConfigError") return extra;
  return plugin.create({
    layout,
    clusterConfigPath: context.clusterConfigPath,
    selfCommand: context.selfCommand,
    clock: context.clock,
    log: context.log,
    env: context.env,
    settings: settings.backends[name],
    faults: context.faults,
    identities: context.identities,
    ...(context.accounts !== undefined ? { accounts: context.accounts } : {}),
    ...(context.knownTokens !== undefined ? { knownTokens: context.knownTokens } : {}),
    workerSocket: settings.workerListen !== null ? workerSocketPath(layout) : null,
    orphanSweep: settings.orphanSweep,
    isolation: sessionIsolationKit(context, extra.dirs),
  });
}
