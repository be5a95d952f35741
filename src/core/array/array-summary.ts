/**
 * One phase for a whole array from the phases of its elements, and a view of them that stays
 * one screen for 1,000+ elements. The rules (docs/api.md, "Job arrays"):
 *
 * - COMPLETED only when every element completed;
 * - FAILED once every element ended and any of them FAILED or was LOST, naming how many and
 *   which (the first failed element's reason and exit code are the array's);
 * - CANCELLED once every element ended, none failed and any was cancelled;
 * - before that: QUEUED while no element has started, STOPPING while elements are being
 *   stopped and none runs, RUNNING otherwise. A failure is named in the message as soon as it
 *   is seen, so a sweep is not watched for an hour before its first broken element shows.
 *
 * An element the backend did not report is UNKNOWN: it keeps the array from ending, because
 * "not reported" is never "completed".
 */
import { isTerminal, type Phase, type Reason } from "../models.ts";
import { formatIndexRanges } from "./index-ranges.ts";

export interface ElementState {
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly exitCode: number | null;
}

export interface ElementView extends ElementState {
  readonly index: number;
}

export type ElementPhase = Phase | "UNKNOWN";

export interface ArraySummary {
  readonly size: number;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string;
  readonly exitCode: number | null;
  /** Elements per phase; phases with none are left out. */
  readonly counts: Readonly<Partial<Record<ElementPhase, number>>>;
  /** The indices in each phase as ranges ("0-16,18-411"): every element's state, compactly. */
  readonly indices: Readonly<Partial<Record<ElementPhase, string>>>;
  /** Elements that did not (or not yet) complete, lowest index first, at most `limit`. */
  readonly elements: readonly ElementView[];
  /** How many such elements `elements` leaves out. */
  readonly elementsOmitted: number;
}

const FAILED_LIKE: ReadonlySet<Phase> = new Set<Phase>(["FAILED", "LOST"]);
const STARTED: ReadonlySet<Phase> = new Set<Phase>(["RUNNING", "STOPPING"]);
const PHASE_ORDER: readonly ElementPhase[] = [
  "COMPLETED",
  "FAILED",
  "LOST",
  "CANCELLED",
  "RUNNING",
  "STOPPING",
  "QUEUED",
  "SUBMITTING",
  "PENDING",
  "UNKNOWN",
];

function group(size: number, elements: ReadonlyMap<number, ElementState>) {
  const byPhase = new Map<ElementPhase, number[]>();
  for (let index = 0; index < size; index += 1) {
    const phase: ElementPhase = elements.get(index)?.phase ?? "UNKNOWN";
    const list = byPhase.get(phase);
    if (list === undefined) byPhase.set(phase, [index]);
    else list.push(index);
  }
  return byPhase;
}

function countsLine(size: number, counts: Partial<Record<ElementPhase, number>>): string {
  const parts = PHASE_ORDER.filter((p) => (counts[p] ?? 0) > 0).map(
    (p) => `${counts[p]} ${p.toLowerCase()}`,
  );
  return `${size} element${size === 1 ? "" : "s"}: ${parts.join(", ")}`;
}

function failedIndices(byPhase: ReadonlyMap<ElementPhase, number[]>): number[] {
  const out: number[] = [];
  for (const phase of FAILED_LIKE) out.push(...(byPhase.get(phase) ?? []));
  return out.sort((a, b) => a - b);
}

function describeFailures(size: number, failed: readonly number[]): string {
  if (failed.length === 0) return "";
  const which = formatIndexRanges(failed);
  return `${failed.length} of ${size} element${size === 1 ? "" : "s"} failed (${failed.length === 1 ? "index" : "indices"} ${which})`;
}

export function summarizeArray(
  size: number,
  elements: ReadonlyMap<number, ElementState>,
  limit = 100,
): ArraySummary {
  const byPhase = group(size, elements);
  const counts: Partial<Record<ElementPhase, number>> = {};
  const indices: Partial<Record<ElementPhase, string>> = {};
  for (const phase of PHASE_ORDER) {
    const list = byPhase.get(phase);
    if (list === undefined) continue;
    counts[phase] = list.length;
    indices[phase] = formatIndexRanges(list);
  }
  const notable: ElementView[] = [];
  let omitted = 0;
  for (let index = 0; index < size; index += 1) {
    const state = elements.get(index);
    if (state === undefined || state.phase === "COMPLETED") continue;
    // Only the view's fields: a backend's own extras (times) would bloat a 1,000-row view.
    const view = { index, phase: state.phase, reason: state.reason, exitCode: state.exitCode };
    if (notable.length < limit) notable.push(view);
    else omitted += 1;
  }
  const failed = failedIndices(byPhase);
  const first = (list: readonly number[]) => elements.get(list[0] as number);
  const overall = decidePhase(byPhase, failed, first);
  const failures = describeFailures(size, failed);
  const message =
    overall.phase === "COMPLETED"
      ? `all ${size} element${size === 1 ? "" : "s"} completed`
      : [countsLine(size, counts), failures].filter((s) => s !== "").join("; ");
  return {
    size,
    ...overall,
    message,
    counts,
    indices,
    elements: notable,
    elementsOmitted: omitted,
  };
}

function decidePhase(
  byPhase: ReadonlyMap<ElementPhase, number[]>,
  failed: readonly number[],
  first: (list: readonly number[]) => ElementState | undefined,
): { readonly phase: Phase; readonly reason: Reason | null; readonly exitCode: number | null } {
  const has = (p: ElementPhase) => (byPhase.get(p)?.length ?? 0) > 0;
  const allEnded = [...byPhase.keys()].every((p) => p !== "UNKNOWN" && isTerminal(p));
  if (allEnded) {
    if (failed.length > 0) {
      const f = first(failed);
      return { phase: "FAILED", reason: f?.reason ?? null, exitCode: f?.exitCode ?? null };
    }
    const cancelled = byPhase.get("CANCELLED") ?? [];
    if (cancelled.length > 0) {
      const c = first(cancelled);
      return { phase: "CANCELLED", reason: c?.reason ?? null, exitCode: c?.exitCode ?? null };
    }
    return { phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 };
  }
  if (has("STOPPING") && !has("RUNNING")) {
    return { phase: "STOPPING", reason: null, exitCode: null };
  }
  const started = [...byPhase.keys()].some(
    (p) => p !== "UNKNOWN" && (STARTED.has(p) || isTerminal(p)),
  );
  if (started) return { phase: "RUNNING", reason: "STARTED", exitCode: null };
  const queued = byPhase.get("QUEUED") ?? [];
  return {
    phase: "QUEUED",
    reason: queued.length > 0 ? (first(queued)?.reason ?? null) : null,
    exitCode: null,
  };
}
