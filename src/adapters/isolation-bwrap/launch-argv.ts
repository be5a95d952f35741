/**
 * The pieces every launch argv is built from, sandboxed or not:
 *  - `envArgv`: `env -i -- NAME=VALUE... PROGRAM ARGS...`, the last step before the job's
 *    own program. The environment exists from there on only: whatever runs before it (the
 *    sandbox, the privilege drop) runs with the launcher's fixed environment, so a variable
 *    a request chose can never make a helper load code (LD_PRELOAD and friends are also
 *    refused at admission; this is the second wall);
 *  - `dropArgv`: `setpriv` to an unprivileged uid/gid with no supplementary groups, no
 *    capability in any set and no_new_privs, for a daemon that runs as root;
 *  - `plainWrapper`: both, for a backend that has no verified sandbox: the job still never
 *    runs as root, and never with the request's variables in a host-side helper.
 */

import type {
  JobEnv,
  JobIdentities,
  LaunchWrapper,
  OwnedPaths,
  RunAs,
} from "../../core/sandbox.ts";
import { chownDirBeneath } from "../../lib/beneath-fs.ts";

/** coreutils' env and util-linux's setpriv, at their Debian/RHEL paths (also on nodes). */
const ENV_PROGRAM = "/usr/bin/env";
const SETPRIV_PROGRAM = "/usr/bin/setpriv";

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The argv that starts `argv` with exactly `env`. With names to inherit, a `sh -c` reads
 * them from the launching process first (a per-task rank a launcher sets), then `env -i`.
 */
export function envArgv(argv: readonly string[], env: JobEnv): readonly string[] {
  const assignments: string[] = [];
  for (const [name, value] of Object.entries(env.vars)) {
    // A caller bug, not user input: admission and the backends validate names first.
    if (!ENV_NAME.test(name)) throw new Error(`invalid environment variable name ${name}`);
    assignments.push(`${name}=${value}`);
  }
  const inherit = env.inherit ?? [];
  if (inherit.length === 0) return [ENV_PROGRAM, "-i", "--", ...assignments, ...argv];
  for (const name of inherit) {
    if (!ENV_NAME.test(name)) throw new Error(`invalid inherited variable name ${name}`);
  }
  // "$@" holds the fixed assignments and then the program: inherited values come first, so
  // a fixed value of the same name (later on env's command line) wins. An unset name is left
  // out rather than set empty (a job without a deadline has no OPENAI4S_DEADLINE).
  const copies = inherit.map((n) => `\${${n}+"${n}=$${n}"}`).join(" ");
  return [
    "/bin/sh",
    "-c",
    `exec ${ENV_PROGRAM} -i -- ${copies} "$@"`,
    "openai4s-env",
    ...assignments,
    ...argv,
  ];
}

/**
 * `setpriv` down to `runAs`: every capability set emptied, no_new_privs, and no groups but
 * the account's own (an owner's: a lab's share must stay reachable; a lease has none).
 */
export function dropArgv(runAs: RunAs, argv: readonly string[]): readonly string[] {
  const groups = runAs.groups ?? [];
  // Refused where accounts are resolved too; here as the last wall before a launch.
  if (groups.some((g) => !Number.isInteger(g) || g <= 0)) {
    throw new Error(`refusing supplementary groups ${groups.join(",")}: never root's group`);
  }
  return [
    SETPRIV_PROGRAM,
    `--reuid=${runAs.uid}`,
    `--regid=${runAs.gid}`,
    groups.length === 0 ? "--clear-groups" : `--groups=${groups.join(",")}`,
    "--no-new-privs",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--",
    ...argv,
  ];
}

/**
 * Hands the job's directories to its identity: the workspace directory itself (what an
 * earlier attempt left inside is already the job's), and the credential directory with the
 * files directly in it (the worker must read its credential). Every one is reached from the
 * spool and chowned through an fd opened O_NOFOLLOW: a job that swaps a credential file
 * for a link between a listing and a chown-by-path would have been given the link's target.
 */
export function prepareOwnership(runAs: RunAs | null, paths: OwnedPaths): void {
  if (runAs === null) return;
  chownDirBeneath(paths.spoolDir, paths.workspaceDir, runAs);
  if (paths.credentialDir === null) return;
  chownDirBeneath(paths.spoolDir, paths.credentialDir, runAs, { regularFiles: true });
}

/** The workspace's identity claimed, and given what the job must own (see prepareOwnership). */
export function claimAndPrepare(identities: JobIdentities, paths: OwnedPaths): RunAs | null {
  const runAs = identities.claim(paths.workspaceDir, paths.subject);
  prepareOwnership(runAs, paths);
  return runAs;
}

/** No sandbox: the privilege drop (as root) and the job's environment, nothing else. */
export function plainWrapper(identities: JobIdentities): LaunchWrapper {
  return {
    sandboxed: false,
    identities,
    wrap(argv, _paths, env, runAs) {
      const inner = envArgv(argv, env);
      return runAs === null ? inner : dropArgv(runAs, inner);
    },
    prepare(paths) {
      return claimAndPrepare(identities, paths);
    },
  };
}
