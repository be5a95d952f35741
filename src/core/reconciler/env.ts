import type { Clock } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { AttemptPreparer } from "../attempt-preparer.ts";
import type { SubmissionToken } from "../models.ts";
import type { ReconcilerStore, Transition } from "../ports/reconciler-store.ts";
import type { TickBackend } from "./backend-calls.ts";
import type { TickFocus } from "./focus.ts";
import type { LaneOutcome, Lanes } from "./lanes.ts";
import type { ProfileBreakers } from "./profile-breaker.ts";
import type { RunwaySchedule } from "./runway.ts";
import type { BarrierHooks, ReconcilerFaultPoint } from "./types.ts";

/** Everything one tick works with. Built fresh per tick, except `focus` and the shared parts. */
export interface TickEnv {
  readonly store: ReconcilerStore;
  readonly backend: TickBackend;
  /**
   * Whether new attempts wait: submitting into a backend that is not answering only piles up
   * Unknowns to resolve. A tick asks its own reads; a submission pass, which reads nothing,
   * asks the calls in flight and the last tick (reconciler.ts).
   */
  readonly newAttemptsHeld: () => boolean;
  readonly preparer: AttemptPreparer;
  readonly hooks: BarrierHooks;
  readonly clock: Clock;
  readonly log: Log;
  readonly mintToken: () => SubmissionToken;
  readonly newAllocationId: () => string;
  readonly faultPoint: (name: ReconcilerFaultPoint) => void;
  readonly counters: { writes: number; minted: number; submitted: number };
  /** Tokens whose unknown-to-the-store terminal fact was already logged (log once). */
  readonly reportedUnknownFacts: Set<string>;
  /** Submit and cancel run here, outliving the tick (reconciler/lanes.ts). */
  readonly lanes: Lanes;
  /**
   * Attempts this process minted and has not handed to the backend yet, across ticks: their
   * tokens need no lookup before the first submit (INV-8 holds: nothing asked the backend to
   * record them). Memory only, so after a restart every such attempt is looked up first.
   */
  readonly fresh: Set<string>;
  /** Lanes this tick started; `reconcileOnce` may wait for them. */
  readonly started: Promise<LaneOutcome>[];
  /** What to look at, kept across ticks (reconciler/focus.ts); the one thing that outlives it. */
  readonly focus: TickFocus;
  /** How long before its limit an allocation of this profile is warned, in ms (runway.ts). */
  readonly warningLeadMs: (profile: string) => number;
  /** When each live workload's warning falls due, across ticks (runway.ts); `run` wakes for it. */
  readonly runway: RunwaySchedule;
  /** Per profile: whether the backend keeps refusing it (profile-breaker.ts). */
  readonly breakers: ProfileBreakers;
}

/**
 * Applies compare-and-set transitions in one batch. Store errors propagate on purpose: a
 * failing store is a tick that died half way, and the next tick starts over from what was
 * committed. Catching it here would let the tick go on acting on writes that never happened.
 */
export function write(env: TickEnv, transitions: readonly Transition[]): readonly boolean[] {
  if (transitions.length === 0) return [];
  const applied = env.store.applyTransitions(transitions);
  for (const ok of applied) if (ok) env.counters.writes += 1;
  return applied;
}
