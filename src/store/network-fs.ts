/**
 * SQLite documents that WAL mode does not work over a network filesystem (the shared-memory
 * index needs one host's locking), and NFS/Lustre/GPFS/CIFS locking is unreliable: a
 * database there corrupts quietly. So the daemon refuses to open one unless the admin says
 * so. Bun has no statfs(2); the type comes from /proc/self/mountinfo, the kernel's own
 * table, rather than from a `stat -f` subprocess whose output format and PATH vary.
 */
import { readFileSync } from "node:fs";
import { isWithin } from "../orchestration/layout.ts";

/** Filesystem types (mountinfo's field after " - ") where SQLite's WAL locking fails. */
const NETWORK_FILESYSTEM_TYPES: ReadonlySet<string> = new Set([
  "nfs",
  "nfs4",
  "cifs",
  "smb3",
  "smbfs",
  "lustre",
  "gpfs",
  "ceph",
  "fuse.ceph",
  "fuse.cephfs",
  "glusterfs",
  "fuse.glusterfs",
  "beegfs",
  "fuse.beegfs",
  "panfs",
  "afs",
  "openafs",
  "9p",
  "ocfs2",
  "gfs2",
  "orangefs",
  "pvfs2",
  "ncpfs",
  "coda",
  "fuse.sshfs",
  "fuse.s3fs",
  "fuse.gcsfuse",
  "davfs",
  "fuse.davfs2",
  "wekafs",
  "quobyte",
  "fuse.quobyte",
]);

/** mountinfo escapes space, tab, newline and backslash as 3-digit octal. */
function unescapeMountPath(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_m, octal: string) =>
    String.fromCharCode(Number.parseInt(octal, 8)),
  );
}

/**
 * The filesystem type of the mount `realPath` is on: the mount with the longest mount
 * point containing it, the last listed winning among equals (a later mount hides an earlier
 * one at the same place). Null when no line parses (not Linux's format).
 */
export function filesystemTypeOf(realPath: string, mountinfo: string): string | null {
  let best: { readonly point: string; readonly type: string } | null = null;
  for (const line of mountinfo.split("\n")) {
    const fields = line.split(" ");
    const separator = fields.indexOf("-", 6);
    const pointField = fields[4];
    const type = separator < 0 ? undefined : fields[separator + 1];
    if (pointField === undefined || type === undefined) continue;
    const point = unescapeMountPath(pointField);
    if (!isWithin(point, realPath)) continue;
    if (best === null || point.length >= best.point.length) best = { point, type };
  }
  return best?.type ?? null;
}

export type DatabaseFilesystem =
  | { readonly kind: "Local"; readonly type: string }
  | { readonly kind: "Network"; readonly type: string; readonly message: string }
  | { readonly kind: "Unknown"; readonly message: string };

export function checkDatabaseFilesystem(
  realDir: string,
  readMountinfo: () => string = () => readFileSync("/proc/self/mountinfo", "utf8"),
): DatabaseFilesystem {
  let mountinfo: string;
  try {
    mountinfo = readMountinfo();
  } catch (error) {
    return {
      kind: "Unknown",
      message: `cannot tell which filesystem ${realDir} is on (${String(error)}); pass --allow-network-db if it is local`,
    };
  }
  const type = filesystemTypeOf(realDir, mountinfo);
  if (type === null) {
    return {
      kind: "Unknown",
      message: `cannot tell which filesystem ${realDir} is on; pass --allow-network-db if it is local`,
    };
  }
  if (NETWORK_FILESYSTEM_TYPES.has(type) || type.startsWith("nfs")) {
    return {
      kind: "Network",
      type,
      message: `the state dir ${realDir} is on a network filesystem (${type}): SQLite's WAL locking does not work there and the database would corrupt; put --state-dir on the daemon's local disk (the spool may stay shared), or pass --allow-network-db to accept the risk`,
    };
  }
  return { kind: "Local", type };
}
