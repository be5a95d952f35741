/**
 * One profile of cluster.toml as the rest of the program holds it: the administrator's
 * placement, and the public view that deliberately omits partition, QoS and account (its
 * `toJSON()` is the same view, so serialising a profile by accident cannot leak them).
 */
import type { ResourceMaxima, ResourceProfile } from "../../core/models.ts";
import type { SlurmPlacement } from "./backend-options.ts";
import { resourceOptions } from "./profiles-argv.ts";
import type { MappedField } from "./profiles-schema.ts";

export interface ClusterProfile {
  readonly name: string;
  /** The line of its [profiles.NAME] header. */
  readonly line: number;
  /** The administrator's side: where work on this profile is placed. */
  readonly placement: SlurmPlacement;
  /** What scientists see: no partition, no QoS, no account. */
  public(): ResourceProfile;
  /** Where it lands, in words, for `check-config` (one string per output line). */
  describeMapping(): readonly string[];
  /** Serialising a profile yields the public view, never the mapping. */
  toJSON(): ResourceProfile;
}

/**
 * The most elements one array may have: Slurm's default MaxArraySize (1001, indices 0..1000),
 * which a site may raise but rarely lowers. A larger array is refused at admission, naming
 * `array`, rather than by sbatch after a round trip.
 */
export const DEFAULT_MAX_ARRAY_SIZE = 1001;

/** What a workload may raise its defaults to (`max_` keys), for check-config. */
function maximaLine(maxima: ResourceMaxima): string {
  const parts = [
    maxima.cpus === undefined ? null : `${maxima.cpus} CPUs`,
    maxima.gpus === undefined ? null : `${maxima.gpus} GPUs`,
    maxima.memoryMb === undefined ? null : `${maxima.memoryMb} MB`,
    maxima.timeLimitSeconds === undefined ? null : `${maxima.timeLimitSeconds / 60} min`,
  ];
  return `a workload may ask up to ${parts.filter((p) => p !== null).join(", ")}`;
}

export function createClusterProfile(
  name: string,
  line: number,
  publicView: ResourceProfile,
  placement: SlurmPlacement,
  inherited: ReadonlySet<MappedField>,
): ClusterProfile {
  const frozenPublic: ResourceProfile = Object.freeze({
    ...publicView,
    ...(publicView.kinds.includes("BATCH") ? { maxArraySize: DEFAULT_MAX_ARRAY_SIZE } : {}),
    kinds: Object.freeze([...publicView.kinds]),
    resources: Object.freeze({ ...publicView.resources }),
  });
  const from = (field: MappedField) => (inherited.has(field) ? " (from [cluster])" : "");
  return Object.freeze({
    name,
    line,
    placement: Object.freeze({ ...placement }),
    public: () => frozenPublic,
    toJSON: () => frozenPublic,
    describeMapping(): readonly string[] {
      const where = [
        placement.partition === null
          ? "the cluster's default partition"
          : `partition ${placement.partition}${from("partition")}`,
        placement.qos === null
          ? "no QoS given (the default)"
          : `QoS ${placement.qos}${from("qos")}`,
        placement.account === null
          ? "the submitter's default account"
          : `account ${placement.account}${from("account")}`,
      ].join(", ");
      const options = resourceOptions(placement);
      return [
        where,
        options.kind === "Valid"
          ? `sbatch ${options.argv.join(" ")}`
          : `invalid: ${options.message}`,
        ...(placement.maxima === undefined ? [] : [maximaLine(placement.maxima)]),
        // The admin's eyes only: who jobs run as and what is bound in, sources included.
        ...(publicView.runAs === "owner"
          ? ["runs as the owning principal's unix account (submitted with --uid/--gid)"]
          : []),
        ...(publicView.mounts ?? []).map((m) => `mount ${m.source} at ${m.target} (${m.mode})`),
      ];
    },
  });
}
