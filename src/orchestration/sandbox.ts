/**
 * How a backend turns an allocation's command into the argv it really starts. Every launch
 * goes through a LaunchWrapper, and the argv it returns is self-contained:
 *  - the job's environment is on it, applied by `env -i` as the LAST step before the job's
 *    own program, so no host-side helper (the sandbox, the privilege drop) ever runs with
 *    a variable the request chose (measured: `LD_PRELOAD` given to the host-side bwrap ran
 *    code as root);
 *  - when the daemon runs as root, the job runs as an unprivileged uid/gid (RunAs), never
 *    as root: uid 0 without capabilities still owns every root-owned file it can reach.
 *
 * A Sandbox is the wrapper that also puts the job in its own mount, PID and IPC namespace in
 * which only its own workspace and credential directory exist, so sibling allocations of
 * the same uid cannot read each other's files. A backend that is given a Sandbox wraps
 * EVERY launch with it (BATCH included) and may then declare SessionIsolationProvider by
 * delegating to `verify()`.
 */
import type { IsolationVerdict } from "./ports.ts";

/** The unprivileged identity jobs run as when the daemon runs as root. Never uid 0. */
export interface RunAs {
  readonly uid: number;
  readonly gid: number;
  /** What the admin named (`nobody`, `65534`, `svc:900`), for messages. */
  readonly label: string;
}

export interface SandboxPaths {
  /** Directories the sandboxed process may see and write (its workspace). */
  readonly writable: readonly string[];
  /** Directories it may read only (e.g. the credential directory, the binary's directory). */
  readonly readOnly: readonly string[];
}

/** The job's environment: fixed values, plus names whose value the launcher sets per task. */
export interface JobEnv {
  readonly vars: Readonly<Record<string, string>>;
  /**
   * Names copied from the launching process's own environment into the job's (e.g. the
   * rank variable a cluster's task launcher sets per task). Only names the backend chose.
   */
  readonly inherit?: readonly string[];
}

/** What a job must own to work: its workspace, and (sessions) its credential directory. */
export interface OwnedPaths {
  readonly workspaceDir: string;
  readonly credentialDir: string | null;
}

/**
 * What the launch may reach beyond its paths. `network: "none"`: its own network namespace
 * with only loopback (no host service, no gateway port, no other machine). Only a Sandbox
 * can give that; a plain wrapper's backend refuses such a launch instead of ignoring it.
 */
export interface LaunchReach {
  readonly network?: "host" | "none";
}

export interface LaunchWrapper {
  /** True when launches run inside a per-allocation sandbox (see Sandbox). */
  readonly sandboxed: boolean;
  /** The identity jobs run as; null when the daemon is not root (jobs keep its uid). */
  readonly runAs: RunAs | null;
  /** The argv that runs `argv` with `env`, exposing only `paths` when sandboxed. */
  wrap(
    argv: readonly string[],
    paths: SandboxPaths,
    env: JobEnv,
    reach?: LaunchReach,
  ): readonly string[];
  /**
   * Gives the job's identity what it must own (no-op without RunAs). Called on the daemon's
   * host before submitting; throws on a filesystem error (broken infrastructure).
   */
  prepare(paths: OwnedPaths): void;
}

export interface Sandbox extends LaunchWrapper {
  /** A short name for diagnostics, e.g. "bubblewrap". */
  readonly mechanism: string;
  /**
   * Proves the sandbox works before anyone relies on it: a probe launched exactly as a real
   * allocation would be must read its own marker and must NOT see a sibling canary file or a
   * sibling process, and must hold no privilege. Anything else is Unverified.
   */
  verify(): Promise<IsolationVerdict>;
}
