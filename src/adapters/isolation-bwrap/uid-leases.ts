/**
 * Who jobs run as (JobIdentities): the daemon's own uid, one fixed account, or, for a root
 * daemon by default, a uid of their own per workload, leased from a range the admin gives.
 *
 * Why per workload: with one shared uid (`nobody`), a path that leaks into a sandbox (issue
 * 18: a bind chosen from a job's argv[0], `/proc/PID/root`) reached every other job's files,
 * since they were all its own. With a uid each, the kernel's permission check stands behind
 * the namespace: another allocation's 0600 file is a stranger's. The workspace is kept across
 * a workload's attempts, so its attempts (never live at once) share its uid: a retry must own
 * what the failed attempt left.
 *
 * The lease IS the workspace's owner: the daemon gives the workspace directory to the uid,
 * so the lease is as durable as the spool, needs no table, and survives a restart (the spool
 * is scanned at the first claim). A uid is never leased while a workspace it owns remains in
 * the spool (files of an earlier holder), never twice at once, and never 0, 65534 (`nobody`,
 * which other services share) or 65535 (the 16-bit "no uid").
 */
import { lchownSync, lstatSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { JobIdentities, RunAs } from "../../core/sandbox.ts";

/** An inclusive range of uids (and the gids of the same numbers). */
export interface UidRange {
  readonly first: number;
  readonly last: number;
}

/** systemd's DynamicUser block (61184-65519): free on most distributions by convention. */
export const DEFAULT_UID_RANGE: UidRange = { first: 61184, last: 65519 };

/** What holds a uid that a live process runs as but no workspace in the spool owns. */
const HELD_BY_PROCESS = "(a live process)";

const NOBODY: RunAs = { uid: 65534, gid: 65534, label: "nobody" };
/** Never leased: root, nobody (shared with other services), the 16-bit and 32-bit "no uid". */
const NEVER_LEASED = new Set([0, 65534, 65535, 0xffffffff]);

export function describeRange(range: UidRange): string {
  return `${range.first}-${range.last}`;
}

/** The daemon's uid (null) or one account for every job (`--run-as`). */
export function fixedIdentities(runAs: RunAs | null): JobIdentities {
  return {
    switchesUid: runAs !== null,
    description:
      runAs === null
        ? "the daemon's own uid (in a user namespace when sandboxed)"
        : `one account for every job: ${runAs.label} (uid ${runAs.uid}, gid ${runAs.gid})`,
    probe: runAs,
    claim: () => runAs,
  };
}

export interface LeasedIdentitiesOptions {
  readonly range: UidRange;
  /** The spool's workloads directory: `<workload>/workspace` below it holds the leases. */
  readonly workloadsDir: string;
  /**
   * Uids of processes alive on this host (default: read from /proc). A uid one of them runs
   * as is not leased even when its workspace is gone: an earlier holder's process (a job
   * that outlived its allocation) would own the new holder's files.
   */
  readonly liveUids?: () => Iterable<number>;
  /**
   * Ids never leased because they name someone (a passwd entry's uid, a group's gid): a job
   * leased uid 61200 must not own a real user's files, nor its gid put it in a real group.
   * systemd's DynamicUser skips such ids the same way.
   */
  readonly namedIds?: ReadonlySet<number>;
}

/**
 * The name of the account (and group) a site gives a leased uid, `o4slease<UID>`: a
 * scheduler looks a job's uid up on its controller and nodes (one requeued a job of a uid
 * without one for ever, "getpwuid failed"), and a root daemon has the scheduler own each job
 * as its leased uid when the uid has such an account (issue 32). The name must carry its own
 * id, so no person's account is ever mistaken for a lease's.
 */
export const LEASE_ACCOUNT_PREFIX = "o4slease";

/**
 * The uids of `passwd` and the gids of `group` (their third field), for `namedIds`: every
 * entry but a lease's own account (`o4slease<ID>` with that very id).
 */
export function namedIdsOf(passwd: string | null, group: string | null): Set<number> {
  const ids = new Set<number>();
  for (const text of [passwd, group]) {
    for (const line of (text ?? "").split("\n")) {
      const [name, , id] = line.split(":");
      if (id === undefined || !/^\d+$/.test(id)) continue;
      if (name === `${LEASE_ACCOUNT_PREFIX}${id}`) continue;
      ids.add(Number(id));
    }
  }
  return ids;
}

/** Every real, effective, saved and filesystem uid of the processes in /proc. */
export function procLiveUids(): Set<number> {
  const uids = new Set<number>();
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return uids;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const line = readFileSync(`/proc/${entry}/status`, "utf8")
        .split("\n")
        .find((l) => l.startsWith("Uid:"));
      for (const field of line?.split(/\s+/).slice(1) ?? []) {
        if (/^\d+$/.test(field)) uids.add(Number(field));
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return uids;
}

/** A uid (= gid) per workload from `range`, leased by owning its workspace. */
export function leasedIdentities(options: LeasedIdentitiesOptions): JobIdentities {
  const { range, workloadsDir } = options;
  const liveUids = options.liveUids ?? procLiveUids;
  const namedIds = options.namedIds ?? new Set<number>();
  /** uid -> the workspace that holds it. Null until the spool was first scanned. */
  let holders: Map<number, string> | null = null;
  /** Where the search for a free uid resumes: a freed uid is reused as late as possible. */
  let cursor = range.first;

  const inRange = (uid: number) => uid >= range.first && uid <= range.last;
  const identity = (uid: number): RunAs => ({ uid, gid: uid, label: `uid ${uid} (leased)` });

  /** Held uids: each workspace's owner, and (held by no workspace) live processes' uids. */
  function scan(): Map<number, string> {
    const found = new Map<number, string>();
    for (const uid of liveUids()) {
      if (inRange(uid)) found.set(uid, HELD_BY_PROCESS);
    }
    let workloads: string[];
    try {
      workloads = readdirSync(workloadsDir);
    } catch (error) {
      if ((error as { code?: unknown }).code === "ENOENT") return found;
      throw error;
    }
    for (const w of workloads) {
      const workspace = join(workloadsDir, w, "workspace");
      try {
        const st = lstatSync(workspace);
        const earlier = found.get(st.uid);
        const free = earlier === undefined || earlier === HELD_BY_PROCESS;
        if (st.isDirectory() && inRange(st.uid) && free) found.set(st.uid, workspace);
      } catch {
        // No workspace (yet, or removed): it holds nothing.
      }
    }
    return found;
  }

  function nextFree(held: Map<number, string>): number | null {
    const size = range.last - range.first + 1;
    for (let i = 0; i < size; i++) {
      const uid = range.first + ((cursor - range.first + i) % size);
      if (!held.has(uid) && !NEVER_LEASED.has(uid) && !namedIds.has(uid)) {
        cursor = uid + 1 > range.last ? range.first : uid + 1;
        return uid;
      }
    }
    return null;
  }

  return {
    switchesUid: true,
    description: `a uid of its own per workload, leased from ${describeRange(range)} (gid alike)`,
    probe: NOBODY,
    claim(workspaceDir) {
      holders ??= scan();
      const st = lstatSync(workspaceDir);
      // The directory itself, never what a link points at: chown follows nothing here.
      if (!st.isDirectory()) throw new Error(`workspace ${workspaceDir} is not a directory`);
      const holder = holders.get(st.uid);
      if (inRange(st.uid) && (holder === workspaceDir || holder === undefined)) {
        holders.set(st.uid, workspaceDir);
        return identity(st.uid);
      }
      let uid = nextFree(holders);
      if (uid === null) {
        // Workspaces removed since the last scan (an admin's clean-up) free their uids.
        holders = scan();
        uid = nextFree(holders);
      }
      if (uid === null) {
        throw new Error(
          `no free uid in ${describeRange(range)}: each is held by a workspace still in the spool (${workloadsDir}); remove finished workloads' directories or give a larger --uid-range`,
        );
      }
      lchownSync(workspaceDir, uid, uid);
      holders.set(uid, workspaceDir);
      return identity(uid);
    },
  };
}
