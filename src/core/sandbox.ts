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
import type { IsolationVerdict } from "./ports/backend-capabilities.ts";

/** The unprivileged identity jobs run as when the daemon runs as root. Never uid 0. */
export interface RunAs {
  readonly uid: number;
  readonly gid: number;
  /** What the admin named (`nobody`, `65534`, `svc:900`), or the lease, for messages. */
  readonly label: string;
  /**
   * Supplementary groups (absent or empty: none, `setpriv --clear-groups`). Only an owner's
   * account has any: a scientist's job must reach what their groups reach (a lab's share).
   */
  readonly groups?: readonly number[];
  /**
   * The unix account's name when the job runs as its owner (a profile's `run_as = "owner"`):
   * a cluster backend then submits the job AS that account (root may), so the
   * scheduler's accounting, fair share and limits see the scientist, not the service.
   */
  readonly account?: string;
}

/**
 * Whose launch it is: its profile (which says whether work runs as its owner) and the
 * principal that owns the workload (null: the admin). Absent when a caller cannot tell (an
 * older caller): the workspace then keeps whoever already owns it.
 */
export interface LaunchSubject {
  readonly profile: string;
  readonly owner: string | null;
}

/**
 * Who each launch runs as, chosen once at start: the daemon's own uid (it is not root), one
 * named account (`--run-as`), or a uid of its own per workload leased from a range
 * (isolation/uid-leases.ts), so that a path leaked into one sandbox still meets another
 * allocation's files as a stranger's.
 */
export interface JobIdentities {
  /** Jobs run as uids other than the daemon's (it is root); their HOME is their workspace. */
  readonly switchesUid: boolean;
  /** In words, for the diagnostics and the start-up log. */
  readonly description: string;
  /** What the isolation probe's allocations run as. */
  readonly probe: RunAs | null;
  /**
   * The identity the job of this workspace runs as (null: the daemon's own uid): the lease
   * the workspace already holds, else a new one, to which the workspace directory is given.
   * Throws when none is free (broken infrastructure: the launch is refused, naming why),
   * and when `subject`'s profile runs work as its owner and the owner has no usable account.
   */
  claim(workspaceDir: string, subject?: LaunchSubject): RunAs | null;
}

export interface SandboxPaths {
  /** Directories the sandboxed process may see and write (its workspace). */
  readonly writable: readonly string[];
  /** Directories it may read only (e.g. the credential directory, the binary's directory). */
  readonly readOnly: readonly string[];
  /**
   * Directories it may read only where they exist: a session environment's prefix, which
   * the daemon cannot see on a node. One missing there is left out of the sandbox, for the
   * worker to report by name (environment-check.ts); a plain bind of it failed the sandbox's
   * start, and the session ended "exit code 1".
   */
  readonly readOnlyIfPresent?: readonly string[];
  /**
   * A host directory whose `tmp/` and `shm/` become the sandbox's /tmp and /dev/shm, shared
   * by the launches of one allocation on one node; absent: a private tmpfs for each. The
   * local backend names the allocation's own directory (its job and its steps share it); on
   * a cluster it is NODE_TMP_PLACEHOLDER, which the task launcher replaces with the node's
   * directory before the sandbox starts. Always a directory the daemon chose and made.
   */
  readonly nodeTmp?: string;
  /**
   * The profile's mounts, their sources resolved on the host at launch: each bound at its
   * target, read-only or writable as the admin declared. Only a Sandbox can honour these.
   */
  readonly mounts?: readonly SandboxMount[];
}

export interface SandboxMount {
  readonly source: string;
  readonly target: string;
  readonly mode: "ro" | "rw";
}

/**
 * Stands for the allocation's per-node directory in a wrapped argv: the daemon builds the
 * argv, but only the node knows which directory (the job id and node index are the
 * launcher's). An absolute path no system has, so an unreplaced one fails the launch.
 */
export const NODE_TMP_PLACEHOLDER = "/openai4s-node-tmp-placeholder";

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
  /**
   * The spool both lie below: they are reached from it with no link followed, so a path a
   * job or another user swapped for a link cannot aim the chown elsewhere (beneath-fs.ts).
   */
  readonly spoolDir: string;
  readonly workspaceDir: string;
  readonly credentialDir: string | null;
  /** Whose launch it is (see LaunchSubject). */
  readonly subject?: LaunchSubject;
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
  /** Who launches run as. */
  readonly identities: JobIdentities;
  /**
   * The argv that runs `argv` with `env` as `runAs` (null: the daemon's uid), exposing only
   * `paths` when sandboxed; `reach` is what the profile lets it reach (its network).
   */
  wrap(
    argv: readonly string[],
    paths: SandboxPaths,
    env: JobEnv,
    runAs: RunAs | null,
    reach?: LaunchReach,
  ): readonly string[];
  /**
   * Claims the job's identity for its workspace and gives it what it must own; returns that
   * identity for `wrap`. Called on the daemon's host before submitting (and before a step);
   * throws on a filesystem error or when no identity is free (broken infrastructure).
   */
  prepare(paths: OwnedPaths): RunAs | null;
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

/**
 * What host-side helpers (bwrap, setpriv, env, a job's supervisor) are started with: nothing
 * a request chose. A policy value, here so every backend starts its helpers the same way.
 */
export const HELPER_ENV: Readonly<Record<string, string>> = {
  PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
  LANG: "C.UTF-8",
};
