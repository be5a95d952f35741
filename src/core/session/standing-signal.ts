/**
 * Where a session's kernel stands (jupyter-service.ts `standing`) may have changed: told by
 * the one that learns it (the readiness pass, which sees every live session's conditions,
 * phase, stop request and current allocation), heard by whoever waits on it (the Jupyter
 * hub's queued requests and its watch on a session ending). The failure it replaces: the hub
 * looked again every 250 ms per waiting kernel, and once a second per watched one, whether
 * anything had changed or not, and a request that became runnable waited out the rest of
 * its 250 ms.
 *
 * In memory, per process: a waiter that is told reads the standing again itself; being told
 * twice, or for a change that does not matter to it, costs one look.
 */

export interface StandingSignal {
  /** Something `workloadId`'s standing is made of changed: its waiters look again. */
  notify(workloadId: string): void;
  /** Resolves at the next `notify` of `workloadId`, or at once when `signal` aborts. */
  changed(workloadId: string, signal?: AbortSignal): Promise<void>;
}

export function createStandingSignal(): StandingSignal {
  const waiters = new Map<string, Set<() => void>>();
  return {
    notify(workloadId) {
      const set = waiters.get(workloadId);
      if (set === undefined) return;
      waiters.delete(workloadId);
      for (const wake of set) wake();
    },
    changed(workloadId, signal) {
      return new Promise<void>((resolve) => {
        if (signal?.aborted) {
          resolve();
          return;
        }
        let set = waiters.get(workloadId);
        if (set === undefined) {
          set = new Set();
          waiters.set(workloadId, set);
        }
        const mine = set;
        const done = () => {
          mine.delete(done);
          // An aborted waiter must not leave an empty entry behind (a map growing per kernel).
          if (mine.size === 0 && waiters.get(workloadId) === mine) waiters.delete(workloadId);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        mine.add(done);
        signal?.addEventListener("abort", done, { once: true });
      });
    },
  };
}
