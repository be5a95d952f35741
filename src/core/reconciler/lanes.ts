/**
 * Independent lanes for the backend commands that change something (submit, cancel). A tick
 * starts such a command and goes on; the command's answer is recorded by the lane when it
 * comes. The failure this guards against: one submission whose answer never comes (a busy
 * controller, a lost answer the command waits out) held the whole tick, so a cancel of an
 * unrelated running workload waited the full command timeout.
 *
 * What makes this safe (INV-8): the attempt's token is durable before the lane starts, and
 * while the lane runs its allocations are "busy", so later ticks neither ask for the token
 * nor submit it again. The lane drops the busy mark only after its answer was written (or
 * could not be), so the next tick either sees the recorded outcome or resolves by token. A
 * crash with a lane in flight leaves exactly what a crash inside a tick left: an attempt
 * without a handle, resolved by token by the next process. Busy marks live in memory only.
 */
import type { Log } from "../../lib/log.ts";

export type LaneKind = "submit" | "cancel";

export type LaneOutcome =
  | { readonly kind: "Recorded" }
  | { readonly kind: "Failed"; readonly error: unknown };

export interface Lanes {
  /** A command for this allocation is in flight: a tick leaves it alone. */
  busy(allocationId: string): boolean;
  /** Whether another lane of this kind may start now. */
  hasRoom(kind: LaneKind): boolean;
  /**
   * Runs `work` in the background, holding `allocationIds` busy until it settles. The
   * returned promise never rejects; a failure is logged and returned as Failed.
   */
  start(
    kind: LaneKind,
    allocationIds: readonly string[],
    work: () => Promise<void>,
  ): Promise<LaneOutcome>;
  /** Lanes in flight now. */
  readonly inFlight: number;
  /** Resolves once no lane is in flight (tests, shutdown). */
  idle(): Promise<void>;
}

export interface LanesOptions {
  /**
   * Commands in flight at most. Submissions may take all but one, so a cancel always finds
   * a free lane however many submissions hang.
   */
  readonly maxInFlight: number;
  readonly log: Log;
  /** Called after a lane settled: its answer is a change the loop should look at soon. */
  readonly onSettled: (kind: LaneKind) => void;
}

export function createLanes(options: LanesOptions): Lanes {
  const maxInFlight = Math.max(2, Math.trunc(options.maxInFlight));
  const busy = new Set<string>();
  const running = new Set<Promise<LaneOutcome>>();
  let submits = 0;

  return {
    busy: (allocationId) => busy.has(allocationId),
    hasRoom(kind) {
      if (running.size >= maxInFlight) return false;
      return kind === "cancel" || submits < maxInFlight - 1;
    },
    start(kind, allocationIds, work) {
      for (const id of allocationIds) busy.add(id);
      if (kind === "submit") submits += 1;
      const lane: Promise<LaneOutcome> = work().then(
        (): LaneOutcome => ({ kind: "Recorded" }),
        (error: unknown): LaneOutcome => {
          options.log.error("backend command lane failed; the next tick resolves it by token", {
            lane: kind,
            error: String(error),
          });
          return { kind: "Failed", error };
        },
      );
      running.add(lane);
      return lane.then((outcome) => {
        running.delete(lane);
        if (kind === "submit") submits -= 1;
        for (const id of allocationIds) busy.delete(id);
        options.onSettled(kind);
        return outcome;
      });
    },
    get inFlight() {
      return running.size;
    },
    async idle() {
      while (running.size > 0) await Promise.all(running);
    },
  };
}
