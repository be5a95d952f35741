/**
 * The names cluster.toml.example uses for a partition, a QoS and an account. An admin who
 * copies the example and edits only the profiles' resources gets a file that checks clean,
 * a daemon that starts, and then every submission refused "invalid placement" (partition
 * `gpu` does not exist here). check-config says so up front, per profile, with the line.
 * A warning, not a refusal: a site may really have a partition called `gpu`.
 */

import type { ClusterProfile } from "./cluster-profile.ts";

const PLACEHOLDERS = {
  partition: ["gpu", "debug"],
  qos: ["interactive"],
  account: ["physics"],
} as const;

export interface ConfigWarning {
  readonly profile: string;
  /** `FILE:LINE: profile "p": partition "gpu" is ...` */
  readonly text: string;
}

/** One warning per placeholder name still in use. */
export function placeholderWarnings(
  displayName: string,
  profiles: readonly ClusterProfile[],
): readonly ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  for (const profile of profiles) {
    for (const field of ["partition", "qos", "account"] as const) {
      const value = profile.placement[field];
      if (value === null || !(PLACEHOLDERS[field] as readonly string[]).includes(value)) continue;
      warnings.push({
        profile: profile.name,
        text: `${displayName}:${profile.line}: profile "${profile.name}": ${field} "${value}" is a name from cluster.toml.example: make sure your cluster has it, or ask the cluster with check-config --preflight`,
      });
    }
  }
  return warnings;
}
