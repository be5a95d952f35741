/**
 * What the workload's view keeps of a job array's summary: its elements' counts and indices
 * by phase and the elements that did not complete (the array's own phase, reason and message
 * are the allocation's already). Stored as canonical JSON text so the reconciler compares the
 * stored text with a fresh one and writes only when the elements changed: a steady tick of a
 * 1,000-element sweep parses nothing and writes nothing.
 */
import type { ArraySummary, ElementPhase, ElementView } from "./array-summary.ts";

export interface ArrayView {
  readonly size: number;
  readonly counts: Readonly<Partial<Record<ElementPhase, number>>>;
  readonly indices: Readonly<Partial<Record<ElementPhase, string>>>;
  readonly elements: readonly ElementView[];
  readonly elementsOmitted: number;
}

/** The view's JSON text, its keys in one fixed order whatever order the summary has them in. */
export function arrayViewJson(summary: ArraySummary): string {
  const view: ArrayView = {
    size: summary.size,
    counts: summary.counts,
    indices: summary.indices,
    elements: summary.elements.map((e) => ({
      index: e.index,
      phase: e.phase,
      reason: e.reason,
      exitCode: e.exitCode,
    })),
    elementsOmitted: summary.elementsOmitted,
  };
  return JSON.stringify(view);
}

/** The view's text when it differs from the stored one; undefined: nothing to write. */
export function changedArrayView(
  stored: string | null | undefined,
  summary: ArraySummary | undefined,
): string | undefined {
  if (summary === undefined) return undefined;
  const json = arrayViewJson(summary);
  return json === stored ? undefined : json;
}
