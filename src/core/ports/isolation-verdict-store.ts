/**
 * Where a backend's last Verified isolation verdict is kept across restarts, with what it
 * takes to judge whether it still counts (core/isolation/remembered-verdict.ts).
 */
export interface StoredIsolationVerdict {
  readonly backend: string;
  readonly mechanism: string;
  /** Epoch ms of the probe that verified it. */
  readonly verifiedAt: number;
  /** The daemon binary that ran that probe (version and executable identity). */
  readonly binary: string;
  /** The nodes the probe ran on. */
  readonly nodes: readonly string[];
}

export interface IsolationVerdictStore {
  load(backend: string): StoredIsolationVerdict | null;
  save(verdict: StoredIsolationVerdict): void;
  /** An Unverified verdict: nothing is remembered, so a restart probes first. */
  forget(backend: string): void;
}
