import type { Transition } from "../../../core/ports/reconciler-store.ts";
import type { StoreDeps } from "../deps.ts";
import { withRelaxedSync } from "../relaxed-sync.ts";
import { applyTransitionInTransaction } from "./apply-transition.ts";

export interface ApplyTransitionsOptions {
  /**
   * Default true: the commit waits for its fsync. False: committed with synchronous=NORMAL
   * (adapters/store-sqlite/relaxed-sync.ts), for steps that only mirror what the backend reports and are
   * written again by the next tick after a power cut.
   */
  readonly durable?: boolean;
}

/**
 * Many independent `applyTransition`s in one IMMEDIATE transaction (each keeps its own
 * compare-and-set; a step that throws rolls the whole batch back). Returns one boolean per transition, in
 * order.
 *
 * Why: every commit is an fsync (synchronous=FULL), about a millisecond here, so a tick that
 * moves 10,000 workloads one commit at a time would take ten seconds. The batch is
 * all-or-nothing on a crash, which is one of the outcomes the one-at-a-time form already
 * allows, so callers need no new reasoning. IMMEDIATE takes the write lock up front: a
 * deferred transaction that starts with reads fails with SQLITE_BUSY_SNAPSHOT instead of
 * waiting when another connection commits first.
 */
export function applyTransitions(
  deps: StoreDeps,
  transitions: readonly Transition[],
  options: ApplyTransitionsOptions = {},
): readonly boolean[] {
  if (transitions.length === 0) return [];
  const sqlite = deps.db.$client;
  const commit = () =>
    sqlite
      .transaction(() => transitions.map((t) => applyTransitionInTransaction(deps, t)))
      .immediate();
  return options.durable === false ? withRelaxedSync(sqlite, commit) : commit();
}
