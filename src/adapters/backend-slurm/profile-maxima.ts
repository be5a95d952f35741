/**
 * A cluster.toml profile's maxima (`max_cpus`, `max_gpus`, `max_memory_mb`,
 * `max_time_limit_minutes`): how far a workload may raise the profile's defaults (issue 35),
 * and the problems a maximum can have against its default.
 */
import type { ResourceMaxima } from "../../core/models.ts";
import { joinKey, type TomlScalar, type TomlTableNode } from "../../lib/toml/subset.ts";
import { int, type Problem } from "./profiles-schema.ts";

/** `max_cpus`, `max_gpus`, `max_memory_mb`, `max_time_limit_minutes`; null when none is set. */
export function maximaOf(values: ReadonlyMap<string, TomlScalar>): ResourceMaxima | null {
  const cpus = int(values, "max_cpus");
  const gpus = int(values, "max_gpus");
  const memoryMb = int(values, "max_memory_mb");
  const minutes = int(values, "max_time_limit_minutes");
  const maxima: ResourceMaxima = {
    ...(cpus === null ? {} : { cpus }),
    ...(gpus === null ? {} : { gpus }),
    ...(memoryMb === null ? {} : { memoryMb }),
    ...(minutes === null ? {} : { timeLimitSeconds: minutes * 60 }),
  };
  return Object.keys(maxima).length === 0 ? null : maxima;
}

/** The default each `max_` key raises, and the default it falls back to when left out. */
const MAXIMA: readonly {
  readonly max: string;
  readonly of: string;
  readonly fallback: number | null;
}[] = [
  { max: "max_cpus", of: "cpus", fallback: 1 },
  { max: "max_gpus", of: "gpus", fallback: 0 },
  { max: "max_memory_mb", of: "memory_mb", fallback: null },
  { max: "max_time_limit_minutes", of: "time_limit_minutes", fallback: null },
];

/**
 * A maximum below its default would refuse the profile's own default; a time maximum without
 * a default would run a job that asks for none with no limit at all, past the maximum.
 */
export function maximaProblems(
  values: ReadonlyMap<string, TomlScalar>,
  node: TomlTableNode,
  path: readonly string[],
  problems: Problem[],
): void {
  for (const { max, of, fallback } of MAXIMA) {
    const bound = int(values, max);
    if (bound === null) continue;
    const position = node.entries.get(max)?.position ?? node.position;
    const key = joinKey([...path, max]);
    const value = int(values, of) ?? fallback;
    if (value === null && of === "time_limit_minutes") {
      problems.push({
        position,
        key,
        message: `${max} needs ${of} (the limit of a workload that asks for none)`,
      });
    } else if (value !== null && bound < value) {
      problems.push({ position, key, message: `${max} (${bound}) is below ${of} (${value})` });
    }
  }
}
