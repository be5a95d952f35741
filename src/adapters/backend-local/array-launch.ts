/**
 * A job array on this machine, before it is recorded: whether the request can run as one,
 * and how many of its elements run at once. Pure: the host's size is handed in.
 */
import { ARRAY_INDEX_ENV } from "../../core/array/array-env.ts";
import { checkArrayRequest } from "../../core/array/array-request.ts";
import type { ResourceProfile } from "../../core/models.ts";
import type { SubmitRequest } from "../../core/ports/allocation-backend.ts";

/** What this machine holds: what an element's share of it is counted against. */
export interface HostCapacity {
  readonly cpus: number;
  readonly memoryMb: number;
}

/** Why this array cannot run here, or null (also null for a request that is no array). */
export function arrayProblem(request: SubmitRequest, profile: ResourceProfile): string | null {
  const array = request.array;
  if (array === undefined) return null;
  if (request.launch.kind !== "COMMAND") return "only a BATCH command runs as a job array";
  // Admission refuses these first; a request that got here anyway must not run unbounded.
  if (profile.maxArraySize === undefined) return `profile ${profile.name} runs no job arrays`;
  const check = checkArrayRequest(array.size, array.maxConcurrent, profile.maxArraySize);
  if (check.kind === "Invalid") return check.message;
  // Each element is told its own; a fixed value would win inside the launch (launch-argv.ts).
  if (Object.hasOwn(request.launch.env, ARRAY_INDEX_ENV)) {
    return `environment variable ${ARRAY_INDEX_ENV} is set per element and cannot be given`;
  }
  return null;
}

/**
 * How many elements run at once: `maxConcurrent` as asked (the user's throttle, a scheduler's
 * array throttle); without it as many as the machine has room for, each element counted with its
 * profile's CPUs and memory (as a scheduler places them), at least one.
 */
export function arrayConcurrency(
  array: NonNullable<SubmitRequest["array"]>,
  profile: ResourceProfile,
  host: HostCapacity,
): number {
  if (array.maxConcurrent !== null) return Math.min(array.maxConcurrent, array.size);
  const cpus = profile.resources.cpus;
  const byCpus = cpus > 0 ? Math.floor(host.cpus / cpus) : host.cpus;
  const memoryMb = profile.resources.memoryMb;
  const byMemory =
    memoryMb === null || memoryMb <= 0 ? array.size : Math.floor(host.memoryMb / memoryMb);
  return Math.max(1, Math.min(array.size, byCpus, byMemory));
}
