/**
 * Dependencies between workloads, as batch users write them (`afterok`, `afterany`): a
 * BATCH names workloads it runs after, and the daemon holds it (PENDING, never submitted)
 * until each of them has ended the way it asked. Held by the daemon on every backend, so a
 * parent that is retried (a new job id per attempt) or not yet submitted cannot leave the
 * dependent waiting on a job that will never end the way a scheduler's own dependency
 * expects. Pure: the reconciler asks, with what the store knows of the parents.
 */
import { isTerminal, type Phase, type Reason } from "./models.ts";

export const DEPENDENCY_KINDS = ["afterok", "afterany"] as const;
export type DependencyKind = (typeof DEPENDENCY_KINDS)[number];

export interface Dependency {
  readonly kind: DependencyKind;
  readonly workloadId: string;
}

/** What the store knows of a parent now; absent from the map: it no longer exists. */
export interface ParentState {
  readonly phase: Phase;
  readonly reason: Reason | null;
}

export type DependencyVerdict =
  /** Every parent ended the way the dependent asked: it may be submitted. */
  | { readonly kind: "Ready" }
  /** At least one parent has not ended yet: the dependent waits, PENDING. */
  | { readonly kind: "Wait"; readonly message: string }
  /**
   * A parent ended in a way that can never satisfy the dependency (afterok and it did not
   * complete, or it is gone): the dependent is ended, its message naming the parent.
   */
  | { readonly kind: "Never"; readonly parentId: string; readonly message: string };

/**
 * The verdict on a dependent's dependencies. "Never" wins over "Wait": once one parent
 * failed, waiting for the others is pointless (a batch scheduler's DependencyNeverSatisfied).
 */
export function dependencyVerdict(
  after: readonly Dependency[],
  parents: ReadonlyMap<string, ParentState>,
): DependencyVerdict {
  const waiting: string[] = [];
  for (const dep of after) {
    const parent = parents.get(dep.workloadId);
    if (parent === undefined) {
      return {
        kind: "Never",
        parentId: dep.workloadId,
        message: `${dep.kind}:${dep.workloadId} can never be met: that workload no longer exists`,
      };
    }
    if (!isTerminal(parent.phase)) {
      waiting.push(`${dep.kind}:${dep.workloadId}`);
      continue;
    }
    if (dep.kind === "afterok" && parent.phase !== "COMPLETED") {
      const why = parent.reason === null ? parent.phase : `${parent.phase} (${parent.reason})`;
      return {
        kind: "Never",
        parentId: dep.workloadId,
        message: `afterok:${dep.workloadId} can never be met: that workload ended ${why}`,
      };
    }
  }
  if (waiting.length === 0) return { kind: "Ready" };
  return { kind: "Wait", message: `waiting for ${waiting.join(",")}` };
}

/** A submission's dependencies, afterok first, each parent once per kind (order kept). */
export function dependenciesOf(
  afterOk: readonly string[] | undefined,
  afterAny: readonly string[] | undefined,
): Dependency[] {
  const out: Dependency[] = [];
  const seen = new Set<string>();
  const add = (kind: DependencyKind, ids: readonly string[] | undefined) => {
    for (const workloadId of ids ?? []) {
      const key = `${kind}:${workloadId}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ kind, workloadId });
    }
  };
  add("afterok", afterOk);
  add("afterany", afterAny);
  return out;
}
