/**
 * Cluster configuration (cluster.toml): `openai4s check-config FILE [--preflight]`, and
 * the profiles a cluster backend is built from (`serve --cluster-config FILE`). Owned by
 * the cluster.toml work. The check-config command names no scheduler: every word about
 * where a profile lands comes from here (describeMapping, the preflight details), reached
 * through the backend's plugin (plugin.ts).
 */

import type {
  CheckedProfile,
  ConfigCheck,
  ConfigPreflight,
} from "../../core/ports/backend-plugin.ts";
import type { PlacementCatalog } from "./backend.ts";
import { placeholderWarnings } from "./placeholder-names.ts";
import { formatRefusal, loadClusterConfig } from "./profiles.ts";
import {
  createSbatchTestRun,
  preflightProfiles,
  type SbatchTestRun,
} from "./profiles-preflight.ts";

export type { CheckedProfile, ConfigCheck, ConfigPreflight };

/** `displayName` is the FILE printed in problems (what the admin typed). */
export function checkClusterConfig(path: string, displayName: string = path): ConfigCheck {
  const loaded = loadClusterConfig({ path });
  switch (loaded.kind) {
    case "Loaded":
      return {
        kind: "Valid",
        profiles: loaded.profiles.map((p) => ({ view: p.public(), mapping: p.describeMapping() })),
        warnings: placeholderWarnings(displayName, loaded.profiles),
      };
    case "Refused":
      return { kind: "Invalid", problem: formatRefusal(displayName, loaded) };
    case "Unreadable":
      return { kind: "Unreadable", problem: `${displayName}: ${loaded.message}` };
    default: {
      const never: never = loaded;
      throw new Error(`unhandled load ${JSON.stringify(never)}`);
    }
  }
}

/**
 * One `--test-only` submission per profile of an already checked file, through the
 * scheduler's clients on `env.PATH` (and `env.SLURM_CONF` when set). Null when the file no
 * longer loads.
 */
export async function preflightClusterConfig(
  path: string,
  env: Readonly<Record<string, string | undefined>>,
  run?: SbatchTestRun,
): Promise<readonly ConfigPreflight[] | null> {
  const loaded = loadClusterConfig({ path });
  if (loaded.kind !== "Loaded") return null;
  const slurmConf = env["SLURM_CONF"];
  const sbatch =
    run ??
    createSbatchTestRun({
      path: env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
      ...(slurmConf === undefined || slurmConf === "" ? {} : { slurmConf }),
    });
  return preflightProfiles(loaded.profiles, sbatch);
}

/** For a cluster backend's entry: the placement catalog, or the message `serve` exits 2 with. */
export function loadClusterPlacements(
  path: string,
):
  | { readonly kind: "Loaded"; readonly catalog: PlacementCatalog }
  | { readonly kind: "ConfigError"; readonly message: string } {
  const loaded = loadClusterConfig({ path });
  switch (loaded.kind) {
    case "Loaded":
      return { kind: "Loaded", catalog: loaded.catalog };
    case "Refused":
      return { kind: "ConfigError", message: formatRefusal(path, loaded) };
    case "Unreadable":
      return { kind: "ConfigError", message: `${path}: ${loaded.message}` };
    default: {
      const never: never = loaded;
      throw new Error(`unhandled load ${JSON.stringify(never)}`);
    }
  }
}
