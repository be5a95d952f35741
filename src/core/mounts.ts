/**
 * Data in (issue 22): directories an admin declares per profile (`source` on the host,
 * `target` in the job, `ro` or `rw`), bound into every sandboxed launch of that profile
 * exactly as declared. Never derived from a request: a job names no path the host resolves.
 * This module is the pure part (the declarations' shape, `{user}`); the filesystem checks
 * live with the sandbox (adapters/isolation-bwrap/mount-checks.ts).
 */

export type MountMode = "ro" | "rw";

export interface ProfileMount {
  /** A host directory; may contain `{user}` on a run_as = "owner" profile. */
  readonly source: string;
  /** Where the job sees it. */
  readonly target: string;
  readonly mode: MountMode;
}

/** Replaced by the owner's unix account name when the job is launched. */
export const USER_PLACEHOLDER = "{user}";

/**
 * Targets a mount may not cover: the sandbox's own system trees and scratch, or the mount
 * would hide (or replace) the programs, /etc allowlist, /proc or /tmp every job relies on.
 */
const RESERVED_TARGETS = [
  "/bin",
  "/sbin",
  "/lib",
  "/lib32",
  "/lib64",
  "/libx32",
  "/usr",
  "/etc",
  "/proc",
  "/sys",
  "/dev",
  "/tmp",
] as const;

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

/** Absolute, no `.`/`..`/empty component, no trailing slash, nothing but printable ASCII. */
function pathProblem(path: string): string | null {
  if (!path.startsWith("/")) return "must be an absolute path";
  if (path === "/") return "must not be the root directory";
  if (!/^[\x21-\x7e]+$/.test(path)) return "must be printable ASCII without spaces";
  const parts = path.split("/").slice(1);
  if (parts.some((p) => p === "" || p === "." || p === "..")) {
    return "must be a normalized path (no //, . or .. and no trailing /)";
  }
  return null;
}

/**
 * What is wrong with a declaration (`where` names it, e.g. `[profiles.gpu.mounts.data]`), or
 * null. `runsAsOwner`: `{user}` means the job's owner, so only such a profile may use it.
 */
export function mountProblem(
  mount: ProfileMount,
  runsAsOwner: boolean,
  where: string,
): string | null {
  const source = pathProblem(mount.source);
  if (source !== null) return `${where} source ${source}`;
  const target = pathProblem(mount.target);
  if (target !== null) return `${where} target ${target}`;
  if (mount.target.includes(USER_PLACEHOLDER)) {
    return `${where} target must not use ${USER_PLACEHOLDER}: every job sees the same path`;
  }
  const reserved = RESERVED_TARGETS.find((r) => within(mount.target, r) || within(r, mount.target));
  if (reserved !== undefined) {
    return `${where} target ${mount.target} would cover the sandbox's ${reserved}`;
  }
  const users = mount.source.split(USER_PLACEHOLDER).length - 1;
  if (users > 0 && !runsAsOwner) {
    return `${where} source uses ${USER_PLACEHOLDER}, which needs run_as = "owner" (whose user would it be?)`;
  }
  if (users > 0 && !mount.source.split("/").includes(USER_PLACEHOLDER)) {
    return `${where} source must use ${USER_PLACEHOLDER} as a whole path component (/srv/data/${USER_PLACEHOLDER})`;
  }
  return null;
}

/** Two mounts of one profile on one target, or one inside another, shadow each other. */
export function overlappingTargets(mounts: readonly ProfileMount[]): string | null {
  for (const [i, a] of mounts.entries()) {
    for (const b of mounts.slice(i + 1)) {
      if (within(a.target, b.target) || within(b.target, a.target)) {
        return `targets ${a.target} and ${b.target} overlap`;
      }
    }
  }
  return null;
}

/** The source with `{user}` replaced by `account` (null: none to put there). */
export function sourceFor(mount: ProfileMount, account: string | null): string | null {
  if (!mount.source.includes(USER_PLACEHOLDER)) return mount.source;
  return account === null ? null : mount.source.split(USER_PLACEHOLDER).join(account);
}

/**
 * `SOURCE:TARGET:MODE` entries separated by `,` (OPENAI4S_LOCAL_MOUNTS); MODE is `ro` or `rw`.
 * Paths with `:` or `,` cannot be written this way (pathProblem refuses spaces anyway).
 */
export function parseMountList(text: string): readonly ProfileMount[] | { readonly error: string } {
  const mounts: ProfileMount[] = [];
  for (const entry of text.split(",")) {
    const [source, target, mode, extra] = entry.split(":");
    if (source === undefined || target === undefined || extra !== undefined) {
      return { error: `${JSON.stringify(entry)}: expected SOURCE:TARGET:MODE` };
    }
    if (mode !== "ro" && mode !== "rw") {
      return { error: `${JSON.stringify(entry)}: MODE must be ro or rw` };
    }
    mounts.push({ source, target, mode });
  }
  return mounts;
}
