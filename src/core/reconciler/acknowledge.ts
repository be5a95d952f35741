/**
 * The acknowledgement sweep for backends that keep durable facts about ended allocations
 * (TerminalAllocationAcknowledger): a fact may be dropped only once the store can no longer
 * need it. That is re-read from the store at sweep time, never taken from the tick's view:
 * the allocation must be terminal AND its workload terminal or already on a later epoch.
 * Acknowledging earlier opens a crash window in which the backend forgot an ending the store
 * never recorded, and the workload's recovery would then be decided on nothing.
 *
 * The sweep runs at the start of a reconciler's first tick (it cannot run in the synchronous
 * constructor) and at the end of every tick: the first closes the window of a crash after a
 * commit and before the acknowledgement, the second acknowledges what this tick committed.
 */
import { isTerminal, type SubmissionToken } from "../models.ts";
import type { TickEnv } from "./env.ts";

export async function acknowledgeSweep(env: TickEnv): Promise<void> {
  const facts = await env.backend.pendingTerminalFacts();
  if (facts === null || facts.length === 0) return;
  const tokens: SubmissionToken[] = [...new Set(facts.map((f) => f.token))];
  const rows = new Map(
    env.store.findAllocationsByTokens(tokens).map((r) => [r.allocation.token as string, r]),
  );
  for (const token of tokens) {
    const row = rows.get(token);
    if (row === undefined) {
      // Not ours, or from a store that was replaced: never acknowledge what we cannot check.
      if (!env.reportedUnknownFacts.has(token)) {
        env.reportedUnknownFacts.add(token);
        env.log.warn("backend holds a terminal fact for a token the store does not know", {
          token,
        });
      }
      continue;
    }
    const { allocation: a, workload: w } = row;
    if (!isTerminal(a.phase)) continue;
    if (!isTerminal(w.phase) && w.executionEpoch <= a.epoch) continue;
    if (await env.backend.acknowledgeTerminal(token)) {
      // After the backend call: acknowledgedAt claims the backend was told. A crash in
      // between leaves it unset, which costs nothing (the backend no longer lists the fact).
      env.store.markAcknowledged(a.id);
      env.counters.writes += 1;
    }
  }
}
