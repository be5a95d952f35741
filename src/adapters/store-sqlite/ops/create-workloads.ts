import type {
  CreateWorkloadInput,
  CreateWorkloadResult,
} from "../../../core/ports/admission-store.ts";
import type { StoreDeps } from "../deps.ts";
import { createWorkload } from "./create-workload.ts";

/** One submission's answer in a group: its result, or what its own insert threw. */
export type GroupedCreate =
  | { readonly kind: "Done"; readonly result: CreateWorkloadResult }
  | { readonly kind: "Threw"; readonly error: unknown };

/**
 * Several submissions in one transaction and one durable commit (a group commit): each in a
 * savepoint of its own (createWorkload's transaction nests as one), in the order given, so
 * each sees the ones before it exactly as if they had committed first: an owner's usage
 * counts the earlier inserts of the group (limits stay exact), and a second submission of
 * one Idempotency-Key finds the first's row (KeyTaken, then a replay). One that throws is
 * rolled back alone and answered with its error; the others commit. The commit itself
 * failing throws: nothing of the group was written.
 */
export function createWorkloads(
  deps: StoreDeps,
  inputs: readonly CreateWorkloadInput[],
): GroupedCreate[] {
  const sqlite = deps.db.$client;
  return sqlite.transaction((): GroupedCreate[] =>
    inputs.map((input): GroupedCreate => {
      try {
        return { kind: "Done", result: createWorkload(deps, input) };
      } catch (error) {
        return { kind: "Threw", error };
      }
    }),
  )();
}
