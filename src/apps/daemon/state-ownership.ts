/**
 * The private state dir is the daemon's alone, checked at start like sshd's StrictModes.
 * Issue 8: an `admin-token` planted by another user in a mode-777 state dir was accepted
 * (that user then held the admin API), and a planted `openai4s.db` with a PENDING row ran
 * its command as root. Tightening modes afterwards cannot undo a plant, so a state dir, or
 * anything in it, owned by another uid, a state dir others may write, or an ancestor that
 * lets another user replace it, is refused: the admin must look, not the daemon guess.
 */
import {
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  realpathSync,
  type Stats,
} from "node:fs";
import { dirname, join } from "node:path";

export type OwnershipCheck =
  | { readonly kind: "Owned" }
  | { readonly kind: "Refused"; readonly message: string };

const STICKY = 0o1000;
const GROUP_OR_OTHER_WRITABLE = 0o022;

/** `uid 65534 (nobody)`: the name from /etc/passwd when there is one, for the admin's eyes. */
export function describeOwner(uid: number, passwd: () => string = readPasswd): string {
  let name: string | undefined;
  try {
    for (const line of passwd().split("\n")) {
      const fields = line.split(":");
      if (fields[2] === String(uid)) {
        name = fields[0];
        break;
      }
    }
  } catch {
    // No readable passwd (a minimal container): the number alone still names the owner.
  }
  return name === undefined || name === "" ? `uid ${uid}` : `uid ${uid} (${name})`;
}

function readPasswd(): string {
  return readFileSync("/etc/passwd", "utf8");
}

function refused(message: string): OwnershipCheck {
  return { kind: "Refused", message };
}

/**
 * Every ancestor of `realPath` (already resolved) must be owned by root or by us, and not
 * writable by group or other: whoever can write a directory can rename what is in it and put
 * their own in its place. A sticky directory (like /tmp) is the exception sshd makes too:
 * there only the owner of an entry may rename it, so it is safe when the entry is ours.
 */
export function checkAncestors(
  realPath: string,
  uid: number,
  what: "state dir" | "spool dir" = "state dir",
): OwnershipCheck {
  let child = realPath;
  let dir = dirname(child);
  while (true) {
    const stat = lstatSync(dir);
    if (stat.uid !== 0 && stat.uid !== uid) {
      return refused(
        `${dir} (above the ${what} ${realPath}) is owned by ${describeOwner(stat.uid)}: that user could replace the ${what}; use a directory whose every parent is owned by root or by the daemon's user`,
      );
    }
    if ((stat.mode & GROUP_OR_OTHER_WRITABLE) !== 0) {
      const childOwner = lstatSync(child).uid;
      const safeSticky = (stat.mode & STICKY) !== 0 && (childOwner === uid || childOwner === 0);
      if (!safeSticky) {
        return refused(
          `${dir} (above the ${what} ${realPath}) is writable by group or other (mode ${(stat.mode & 0o7777).toString(8)}): another user could replace the ${what}`,
        );
      }
    }
    if (dir === child) break;
    child = dir;
    dir = dirname(dir);
    if (dir === child) break;
  }
  return { kind: "Owned" };
}

/**
 * For a directory about to be made at `path`: the nearest existing ancestor, which is where
 * it will be made, must be root's or ours and writable by no one else (sticky is fine: the
 * new entry will be ours), and so must everything above it. Checked before the mkdir, so
 * nothing is created inside a directory another user controls.
 */
export function checkFutureDir(
  path: string,
  uid: number,
  what: "state dir" | "spool dir",
): OwnershipCheck {
  let dir = dirname(path);
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  const real = realpathSync(dir);
  const stat = lstatSync(real);
  if (stat.uid !== 0 && stat.uid !== uid) {
    return refused(
      `${real} (above the ${what} ${path}) is owned by ${describeOwner(stat.uid)}: that user could replace the ${what}; use a directory whose every parent is owned by root or by the daemon's user`,
    );
  }
  if ((stat.mode & GROUP_OR_OTHER_WRITABLE) !== 0 && (stat.mode & STICKY) === 0) {
    return refused(
      `${real} (above the ${what} ${path}) is writable by group or other (mode ${(stat.mode & 0o7777).toString(8)}): another user could replace the ${what}`,
    );
  }
  return checkAncestors(real, uid, what);
}

/** The state dir itself: a directory of ours, not writable by group or other. */
function checkStateDirItself(path: string, uid: number): OwnershipCheck {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) {
    return refused(`state dir ${path} is a symbolic link: give the real directory`);
  }
  if (!stat.isDirectory()) return refused(`state dir ${path} is not a directory`);
  if (stat.uid !== uid) return refused(ownedByOther(path, stat, uid));
  if ((stat.mode & GROUP_OR_OTHER_WRITABLE) !== 0) {
    return refused(
      `state dir ${path} is writable by group or other (mode ${(stat.mode & 0o7777).toString(8)}): anything in it may have been planted; check its contents, then chmod 700 it`,
    );
  }
  return { kind: "Owned" };
}

function ownedByOther(path: string, stat: Stats, uid: number): string {
  return `${path} is owned by ${describeOwner(stat.uid)}, not by the daemon's ${describeOwner(uid)}: refusing to trust it; remove it or give it to the daemon's user`;
}

/**
 * Everything below the private state dir must be ours. `skip` names top-level entries that
 * are not private (the pre-split `workloads/`, about to move to the spool). Symbolic links
 * are judged by their own owner and not followed. Bounded: the private dir holds a few
 * files per live job, and a state dir with more than `maxEntries` is refused as not ours.
 */
function checkPrivateTree(
  root: string,
  uid: number,
  options: { readonly skip?: readonly string[]; readonly maxEntries?: number } = {},
): OwnershipCheck {
  const skip = new Set(options.skip ?? []);
  const maxEntries = options.maxEntries ?? 1_000_000;
  let seen = 0;
  const pending: string[] = [];
  for (const name of readdirSync(root)) if (!skip.has(name)) pending.push(join(root, name));
  while (pending.length > 0) {
    const path = pending.pop() as string;
    seen += 1;
    if (seen > maxEntries) {
      return refused(`state dir ${root} holds more than ${maxEntries} entries: not a state dir`);
    }
    const stat = lstatSync(path);
    if (stat.uid !== uid) return refused(ownedByOther(path, stat, uid));
    if (stat.isDirectory()) {
      for (const name of readdirSync(path)) pending.push(join(path, name));
    }
  }
  return { kind: "Owned" };
}

/** The whole start-up rule, on the resolved path of an existing state dir. */
export function checkStateDirOwnership(
  path: string,
  uid: number,
  // maxEntries: the walk's cap, given by tests (a million entries is too many to make).
  options: { readonly skip?: readonly string[]; readonly maxEntries?: number } = {},
): OwnershipCheck {
  const itself = checkStateDirItself(path, uid);
  if (itself.kind === "Refused") return itself;
  const ancestors = checkAncestors(realpathSync(path), uid);
  if (ancestors.kind === "Refused") return ancestors;
  return checkPrivateTree(path, uid, options);
}
