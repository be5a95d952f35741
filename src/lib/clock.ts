/** Injected wherever time matters, so tests move time instead of sleeping. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock tests advance by hand. */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  set(ms: number): void;
}

export function manualClock(startMs = 1_700_000_000_000): ManualClock {
  let t = startMs;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
    set: (ms) => {
      t = ms;
    },
  };
}

/**
 * Injected wherever code waits, so tests move time instead of sleeping: a loop's period, a
 * timeout, a linger. `after` returns a cancel.
 */
export interface Timers {
  after(delayMs: number, fn: () => void): () => void;
}

export const systemTimers: Timers = {
  after(delayMs, fn) {
    const timer = setTimeout(fn, delayMs);
    return () => clearTimeout(timer);
  },
};

/** Timers that do not keep the process alive by themselves (background probes, samplers). */
export const backgroundTimers: Timers = {
  after(delayMs, fn) {
    const timer = setTimeout(fn, delayMs);
    timer.unref?.();
    return () => clearTimeout(timer);
  },
};

/**
 * Calls `fn` every `periodMs` (the first time one period from now) until the returned cancel.
 * Built on `after`, so a test's manual timeline drives it like any other wait.
 */
export function every(timers: Timers, periodMs: number, fn: () => void): () => void {
  let cancelled = false;
  let cancel = () => {};
  const arm = () => {
    cancel = timers.after(periodMs, () => {
      if (cancelled) return;
      arm();
      fn();
    });
  };
  arm();
  return () => {
    cancelled = true;
    cancel();
  };
}

/** Resolves after `ms` on `timers` (default: the system's). */
export function sleep(ms: number, timers: Timers = systemTimers): Promise<void> {
  return new Promise((resolve) => {
    timers.after(ms, resolve);
  });
}

/**
 * Settles with `work`, or with `onExpiry()` once `ms` passed first; the timer is cancelled
 * either way, so a finished race leaves nothing armed.
 */
export async function withDeadline<T, E>(
  work: Promise<T>,
  ms: number,
  onExpiry: () => E,
  timers: Timers = systemTimers,
): Promise<T | E> {
  let cancel = () => {};
  const expired = new Promise<E>((resolve) => {
    cancel = timers.after(ms, () => resolve(onExpiry()));
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    cancel();
  }
}

/** A clock and timers tests advance by hand: `advance` fires every timer that fell due. */
export interface ManualTimeline extends ManualClock, Timers {
  /** Timers scheduled and neither fired nor cancelled. */
  pending(): number;
}

export function manualTimeline(startMs = 1_700_000_000_000): ManualTimeline {
  let t = startMs;
  let nextId = 0;
  const due = new Map<number, { readonly at: number; readonly fn: () => void }>();
  /** Fires, in due order, every timer due by `until` (those it schedules included). */
  function fireUntil(until: number): void {
    for (;;) {
      let first: [number, { readonly at: number; readonly fn: () => void }] | null = null;
      for (const entry of due) if (first === null || entry[1].at < first[1].at) first = entry;
      if (first === null || first[1].at > until) break;
      due.delete(first[0]);
      t = Math.max(t, first[1].at);
      first[1].fn();
    }
    t = until;
  }
  return {
    now: () => t,
    advance: (ms) => fireUntil(t + ms),
    set: (ms) => fireUntil(ms),
    after(delayMs, fn) {
      const id = nextId++;
      due.set(id, { at: t + Math.max(0, delayMs), fn });
      return () => {
        due.delete(id);
      };
    },
    pending: () => due.size,
  };
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return Bun.sleep(ms);
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Resolves on the event loop's next turn, after the I/O already waiting (requests whose
 * bodies arrived) has run: where work that arrived together is gathered and done once (a
 * group commit), or a long run of synchronous work lets the server answer between pieces.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
