/**
 * The one poller of the tests. Integration tests wait for an observable condition (a file, a
 * phase, a log line), never for a fixed time: a fixed sleep is either too short on a loaded
 * machine (a flaky failure) or too long everywhere (a slow suite). The interval here is only
 * how often the condition is looked at.
 */

export interface EventuallyOptions {
  /** How long the condition may take before the test fails (default 20 s). */
  readonly timeoutMs?: number;
  /** How often it is looked at (default 25 ms). */
  readonly intervalMs?: number;
  /** What is awaited, for the failure message. */
  readonly what?: string;
}

/** A value the probe returns when the condition does not hold yet. */
type NotYet = null | undefined | false;

/**
 * Calls `probe` until it returns a value other than null, undefined or false, and returns that
 * value. A probe that throws (an assertion, a file not there yet) counts as not yet. At the
 * deadline it throws, naming what was awaited and the last value or error seen.
 */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  options: EventuallyOptions = {},
): Promise<Exclude<T, NotYet>> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const intervalMs = options.intervalMs ?? 25;
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== null && value !== undefined && value !== false) {
        return value as Exclude<T, NotYet>;
      }
      last = value;
    } catch (error) {
      last = error;
    }
    if (performance.now() >= deadline) {
      const what = options.what ?? "a condition";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${show(last)}`);
    }
    await Bun.sleep(intervalMs);
  }
}

function show(value: unknown): string {
  if (value instanceof Error) return value.message;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
