/**
 * Work repeated in the background, one run at a time: the orphan sweep and the read of the
 * site's MaxArraySize each wrote this out. `start()` runs it at once, then again after the
 * delay each run resolves to (null: done, until the next `start()`). A run that throws is
 * reported and tried again after `afterErrorMs`, so a bug in one run does not end the loop.
 * `stop()` cancels the next run and waits for the one in progress: nothing of the work runs
 * once it resolves (the daemon closes the store right after).
 */
import type { Timers } from "./clock.ts";

export interface BackgroundLoop {
  start(): void;
  stop(): Promise<void>;
}

export function backgroundLoop(options: {
  readonly timers: Timers;
  /** One run; resolves to the delay before the next one, or null for none. */
  readonly run: () => Promise<number | null>;
  readonly onError: (error: unknown) => void;
  readonly afterErrorMs: number;
}): BackgroundLoop {
  const { timers, run, onError } = options;
  let cancelTimer: (() => void) | null = null;
  let running: Promise<unknown> | null = null;
  let stopped = true;

  function schedule(delayMs: number): void {
    if (stopped) return;
    cancelTimer = timers.after(delayMs, () => {
      running = run()
        .catch((error: unknown) => {
          onError(error);
          return options.afterErrorMs;
        })
        .then((nextMs) => {
          running = null;
          if (nextMs !== null) schedule(nextMs);
        });
    });
  }

  return {
    start() {
      stopped = false;
      schedule(0);
    },
    async stop() {
      stopped = true;
      cancelTimer?.();
      await running;
    },
  };
}
