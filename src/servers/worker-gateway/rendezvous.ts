/**
 * Rendezvous: which connection holds each rank of an (allocation, epoch), and who waits for
 * all ranks to be there. Keyed by epoch too, so a latecomer from a previous epoch never
 * satisfies a wait on the current one. Knows nothing of sockets: the gateway seats and
 * unseats connections as they are accepted and retired.
 */
import type { WaitOutcome } from "../../core/ports/worker-gateway.ts";

export const slotKey = (allocationId: string, epoch: number) => `${epoch}\u0000${allocationId}`;

export interface Rendezvous<C> {
  /** `conn` holds the rank from now on; waiters whose ranks are now all present are told. */
  seat(allocationId: string, epoch: number, rank: number, conn: C): void;
  /** Frees the rank, if `conn` is still the one holding it. */
  unseat(allocationId: string, epoch: number, rank: number, conn: C): void;
  at(allocationId: string, epoch: number, rank: number): C | undefined;
  ranks(allocationId: string, epoch: number): Set<number>;
  seated(allocationId: string, epoch: number): C[];
  /** Resolves Connected once ranks 0..count-1 are all seated, or Aborted with the signal. */
  waitFor(
    allocationId: string,
    epoch: number,
    count: number,
    signal: AbortSignal | undefined,
  ): Promise<WaitOutcome>;
  /** Every waiter resolves Closed. */
  close(): void;
}

interface Waiter {
  readonly ranks: number;
  readonly resolve: (outcome: WaitOutcome) => void;
}

export function createRendezvous<C>(): Rendezvous<C> {
  /** (allocation, epoch) → rank → connection. */
  const slots = new Map<string, Map<number, C>>();
  const waiters = new Map<string, Set<Waiter>>();

  function allPresent(ranks: Map<number, C> | undefined, count: number): boolean {
    for (let r = 0; r < count; r++) if (!ranks?.has(r)) return false;
    return true;
  }

  function notifyWaiters(slot: string): void {
    const set = waiters.get(slot);
    if (!set) return;
    const ranks = slots.get(slot);
    for (const waiter of set) {
      if (allPresent(ranks, waiter.ranks)) {
        set.delete(waiter);
        waiter.resolve({ kind: "Connected" });
      }
    }
    if (set.size === 0) waiters.delete(slot);
  }

  return {
    seat(allocationId, epoch, rank, conn) {
      const slot = slotKey(allocationId, epoch);
      let ranks = slots.get(slot);
      if (!ranks) {
        ranks = new Map();
        slots.set(slot, ranks);
      }
      ranks.set(rank, conn);
      notifyWaiters(slot);
    },

    unseat(allocationId, epoch, rank, conn) {
      const slot = slotKey(allocationId, epoch);
      const ranks = slots.get(slot);
      if (ranks?.get(rank) !== conn) return;
      ranks.delete(rank);
      if (ranks.size === 0) slots.delete(slot);
    },

    at: (allocationId, epoch, rank) => slots.get(slotKey(allocationId, epoch))?.get(rank),

    ranks: (allocationId, epoch) => new Set(slots.get(slotKey(allocationId, epoch))?.keys()),

    seated: (allocationId, epoch) => [...(slots.get(slotKey(allocationId, epoch))?.values() ?? [])],

    waitFor(allocationId, epoch, count, signal) {
      const slot = slotKey(allocationId, epoch);
      if (signal?.aborted) return Promise.resolve({ kind: "Aborted" });
      if (allPresent(slots.get(slot), count)) return Promise.resolve({ kind: "Connected" });
      return new Promise<WaitOutcome>((resolve) => {
        let set = waiters.get(slot);
        if (!set) {
          set = new Set();
          waiters.set(slot, set);
        }
        const onAbort = () => {
          set.delete(waiter);
          if (set.size === 0 && waiters.get(slot) === set) waiters.delete(slot);
          resolve({ kind: "Aborted" });
        };
        const waiter: Waiter = {
          ranks: count,
          resolve: (outcome) => {
            signal?.removeEventListener("abort", onAbort);
            resolve(outcome);
          },
        };
        set.add(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },

    close() {
      for (const set of waiters.values()) for (const w of set) w.resolve({ kind: "Closed" });
      waiters.clear();
    },
  };
}
