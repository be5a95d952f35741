/**
 * Where user activity is recorded: a running exec renews its session's `lastActiveAt` so a
 * long computation is not reclaimed as idle. The reclaimer reads the same field back
 * through its own port (reclaimer-store.ts). Implemented by adapters/store-sqlite/stores/activity-recorder.ts.
 */
export interface ActivityRecorder {
  /** Stamps the workload's `lastActiveAt` with the store's clock. Writes. */
  touch(workloadId: string): void;
}
