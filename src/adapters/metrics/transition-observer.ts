/**
 * Feeds the workload histograms and end counters from the reconciler's own writes: the
 * store port is wrapped, so the core records nothing and every phase change is seen exactly
 * once, when its compare-and-set applied (a step that lost the race is not counted twice).
 * The profile, kind and times come from the live view the reconciler itself loaded; a
 * lookup is one Map.get per applied step, so a 10,000-step tick stays as fast as it was.
 * A POST's first attempt is submitted before any load sees the workload (the admission hands
 * it to a lane at once), so admitted workloads are held here until a load has them.
 */
import { isTerminal, type Workload } from "../../core/models.ts";
import type {
  ReconcileItem,
  ReconcilerStore,
  Transition,
} from "../../core/ports/reconciler-store.ts";
import type { DaemonMetrics } from "./daemon-metrics.ts";

function observe(metrics: DaemonMetrics, t: Transition, item: ReconcileItem | undefined): void {
  const w = t.workload;
  if (w !== undefined && isTerminal(w.phase) && !isTerminal(w.expectedPhase)) {
    metrics.ends.count(item?.workload.kind ?? "unknown", w.phase, w.reason);
  }
  const a = t.allocation;
  if (a === undefined || item === undefined) return;
  // The backend answered this attempt's submit now: measured from the API's acceptance.
  const first = item.current === null || (item.current.id === a.id && item.current.epoch === 1);
  if (a.submittedAt !== undefined && first) {
    metrics.submitLatency.observe((a.submittedAt - item.workload.createdAt) / 1000);
  }
  // The start became known: the queue wait is from the backend's acceptance to it.
  const submittedAt =
    a.submittedAt ?? (item.current?.id === a.id ? item.current.submittedAt : null);
  if (a.startedAt !== undefined && submittedAt !== null) {
    metrics.queueWait.get(item.workload.profile).observe((a.startedAt - submittedAt) / 1000);
  }
}

/** More admitted-but-unseen workloads than this: the oldest is dropped (a bound, not a rule). */
const MAX_ADMITTED_HELD = 10_000;

export interface TransitionObserver {
  /** The store to hand the reconciler. */
  readonly store: ReconcilerStore;
  /** A workload the API admitted with its first attempt: known before any load has it. */
  admitted(workload: Workload): void;
}

export function observeTransitions(
  inner: ReconcilerStore,
  metrics: DaemonMetrics,
): TransitionObserver {
  // The view the reconciler last loaded. With loadViewChanges it is one Map updated in place;
  // a plain loadView (no cached view) is indexed here once per load.
  let items: ReadonlyMap<string, ReconcileItem> = new Map();
  const held = new Map<string, ReconcileItem>();
  const lookup = (id: string): ReconcileItem | undefined => {
    const loaded = items.get(id);
    if (loaded === undefined) return held.get(id);
    if (held.size > 0) held.delete(id);
    return loaded;
  };
  const loadViewChanges = inner.loadViewChanges;
  const store: ReconcilerStore = {
    ...inner,
    loadView() {
      const view = inner.loadView();
      items = new Map(view.map((item) => [item.workload.id, item]));
      return view;
    },
    ...(loadViewChanges === undefined
      ? {}
      : {
          loadViewChanges() {
            const changes = loadViewChanges.call(inner);
            items = changes.items;
            return changes;
          },
        }),
    applyTransitions(transitions) {
      const applied = inner.applyTransitions(transitions);
      for (let i = 0; i < transitions.length; i++) {
        if (applied[i] !== true) continue;
        const t = transitions[i] as Transition;
        const id = t.workload?.id;
        if (id === undefined) continue;
        observe(metrics, t, lookup(id));
        if (t.workload !== undefined && isTerminal(t.workload.phase)) held.delete(id);
      }
      return applied;
    },
  };
  return {
    store,
    admitted(workload) {
      if (held.size >= MAX_ADMITTED_HELD) {
        const oldest = held.keys().next().value;
        if (oldest !== undefined) held.delete(oldest);
      }
      // No attempt row needed: submit latency counts from the workload's acceptance, and an
      // item without `current` is taken as the first attempt.
      held.set(workload.id, { workload, current: null });
    },
  };
}
