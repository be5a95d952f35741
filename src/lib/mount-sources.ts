/**
 * The host side of an admin-declared mount (issue 22): its source must exist, be a
 * directory, and resolve (symbolic links followed) outside the daemon's own trees and the
 * host's /proc, /sys, /dev and /etc: a mount of the state dir would hand jobs the database,
 * one of the spool every other workload's files. Checked at start for every profile, and
 * again at each launch (a `{user}` source exists only then, and any source may have been
 * replaced by a link since). What is bound is the resolved path.
 */
import { realpathSync, statSync } from "node:fs";

/** A declaration as the profile holds it (core/mounts.ts ProfileMount). */
export interface MountDeclaration {
  readonly source: string;
  readonly target: string;
  readonly mode: "ro" | "rw";
}

/** What the sandbox binds: the source resolved, the target and mode as declared. */
export interface BoundMount {
  readonly source: string;
  readonly target: string;
  readonly mode: "ro" | "rw";
}

const USER = "{user}";
/** Host trees no mount may come from, whatever the state dir. */
const HOST_ROOTS = ["/proc", "/sys", "/dev", "/etc"] as const;

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir === "/" ? "/" : `${dir}/`);
}

function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** The trees no source may resolve into: the daemon's (`own`: state dir, spool) and the host's. */
export function forbiddenRoots(own: readonly string[]): readonly string[] {
  return [...new Set([...own, ...HOST_ROOTS].flatMap((p) => [p, real(p)]))];
}

/** Why `path` (resolved) cannot be a source, or null. */
function sourceProblem(path: string, forbidden: readonly string[]): string | null {
  let resolved: string;
  try {
    resolved = realpathSync(path);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return `source ${path} does not exist${typeof code === "string" && code !== "ENOENT" ? ` (${code})` : ""}`;
  }
  if (!statSync(resolved).isDirectory()) return `source ${path} is not a directory`;
  const root = forbidden.find((f) => within(resolved, f) || within(f, resolved));
  if (root !== undefined) {
    const shown = resolved === path ? path : `${path} (${resolved})`;
    return `source ${shown} overlaps ${root}, which no job may see`;
  }
  return null;
}

/**
 * At start: a fixed source as above; a `{user}` source's directory above `{user}` (the part
 * that is the same for everyone), since the rest exists only per owner.
 */
export function startupSourceProblem(
  mount: MountDeclaration,
  forbidden: readonly string[],
): string | null {
  const at = mount.source.indexOf(`/${USER}`);
  const fixed = at < 0 ? mount.source : mount.source.slice(0, at) || "/";
  return sourceProblem(fixed, forbidden);
}

/**
 * At launch: the source for `account` (the owner's unix user; null: none), resolved and
 * checked; an error names the mount. Below `{user}` no link may appear: a directory the
 * user owns must not let them aim the bind (made by root, locally) somewhere else.
 */
export function boundMount(
  mount: MountDeclaration,
  account: string | null,
  forbidden: readonly string[],
): BoundMount | { readonly error: string } {
  const hasUser = mount.source.includes(USER);
  if (hasUser && account === null) {
    return { error: `mount ${mount.target}: its source needs the owner's unix user` };
  }
  const source = hasUser ? mount.source.split(USER).join(account ?? "") : mount.source;
  const problem = sourceProblem(source, forbidden);
  if (problem !== null) return { error: `mount ${mount.target}: ${problem}` };
  const resolved = realpathSync(source);
  if (hasUser) {
    const at = mount.source.indexOf(`/${USER}`);
    const base = real(mount.source.slice(0, at) || "/");
    const expected = `${base === "/" ? "" : base}${source.slice(at)}`;
    if (resolved !== expected) {
      return { error: `mount ${mount.target}: ${source} passes through a symbolic link` };
    }
  }
  return { source: resolved, target: mount.target, mode: mount.mode };
}
