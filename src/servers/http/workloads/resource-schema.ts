/**
 * A submission's `resources`: CPUs, memory and GPUs per node in place of its profile's
 * defaults. Each field's form is checked here; its bound (the profile's maximum) at admission
 * (core/resources.ts), which names the field and the bound.
 */
import * as v from "valibot";

/** Far above any profile's maximum: past these a number is a mistake, not a request. */
export const RESOURCE_LIMITS = {
  cpusMax: 1_000_000,
  memoryMbMax: 2 ** 30,
  gpusMax: 1_000,
} as const;

const positiveInteger = (max: number) =>
  v.pipe(v.number(), v.integer("must be an integer"), v.minValue(1), v.maxValue(max));

export const ResourcesBody = v.optional(
  v.pipe(
    v.strictObject({
      cpus: v.optional(
        v.pipe(
          positiveInteger(RESOURCE_LIMITS.cpusMax),
          v.description("CPUs per node (per task for tasks); absent: the profile's cpus."),
        ),
      ),
      memoryMb: v.optional(
        v.pipe(
          positiveInteger(RESOURCE_LIMITS.memoryMbMax),
          v.description("Memory per node in MB; absent: the profile's memoryMb."),
        ),
      ),
      gpus: v.optional(
        v.pipe(
          v.number(),
          v.integer("must be an integer"),
          v.minValue(0),
          v.maxValue(RESOURCE_LIMITS.gpusMax),
          v.description("GPUs per node; absent: the profile's gpus."),
        ),
      ),
    }),
    v.description(
      "What each allocation gets in place of the profile's defaults, each at most the profile's maximum (GET /v1/profiles: maxCpus, maxMemoryMb, maxGpus); over one is a 400 naming the field and the bound.",
    ),
  ),
);
