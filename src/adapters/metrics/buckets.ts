/**
 * The fixed histogram buckets, in seconds (docs/operations.md lists them). Fixed on purpose:
 * a bucket layout that changed between versions would break every recorded quantile query
 * across an upgrade. Each spans what an operator must tell apart, from "fine" to "stuck".
 */

/** A reconciler tick: milliseconds when healthy, seconds against a slow controller. */
export const TICK_DURATION_BUCKETS_SECONDS = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
] as const;

/** Accepted by the API until the backend answered the submit (the scheduler's own latency in it). */
export const SUBMIT_LATENCY_BUCKETS_SECONDS = [
  0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
] as const;

/** QUEUED to RUNNING: seconds on an idle machine, hours on a busy cluster. */
export const QUEUE_WAIT_BUCKETS_SECONDS = [
  1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400,
] as const;

/** A session's request until READY (queue wait, worker start, kernel start). */
export const TIME_TO_READY_BUCKETS_SECONDS = [
  1, 2.5, 5, 10, 20, 30, 60, 120, 300, 900, 1800, 3600, 21600,
] as const;

/** One exec, request to the cell's end: the code's own run time is in it. */
export const EXEC_DURATION_BUCKETS_SECONDS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
] as const;

/** One API request, the response's headers sent (a followed log stream ends much later). */
export const HTTP_DURATION_BUCKETS_SECONDS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
] as const;
