/**
 * How a backend runs an allocation's processes inside a per-allocation sandbox (its own
 * mount and PID namespace in which only its own workspace and credential directory exist),
 * so sibling allocations of the same uid cannot read each other's files. A backend that is
 * given a Sandbox wraps EVERY launch with it (BATCH included) and may then declare
 * SessionIsolationProvider by delegating to `verify()`.
 */
import type { IsolationVerdict } from "./ports.ts";

export interface SandboxPaths {
  /** Directories the sandboxed process may see and write (workspace, allocation dir). */
  readonly writable: readonly string[];
  /** Directories it may read only (e.g. the credential directory, the binary's directory). */
  readonly readOnly: readonly string[];
}

export interface Sandbox {
  /** A short name for diagnostics, e.g. "bubblewrap". */
  readonly mechanism: string;
  /** The argv that runs `argv` inside a fresh sandbox exposing only `paths`. */
  wrap(argv: readonly string[], paths: SandboxPaths): readonly string[];
  /**
   * Proves the sandbox works before anyone relies on it: a probe launched exactly as a real
   * allocation would be must read its own marker and must NOT see a sibling canary file or a
   * sibling process. Anything else — a missing binary, an error — is Unverified.
   */
  verify(): Promise<IsolationVerdict>;
}
