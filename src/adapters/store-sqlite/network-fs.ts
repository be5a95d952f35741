/**
 * SQLite documents that WAL mode does not work over a network filesystem (the shared-memory
 * index needs one host's locking), and NFS/Lustre/GPFS/CIFS locking is unreliable: a
 * database there corrupts quietly. So the daemon opens one only on a filesystem known to be
 * local, unless the admin says so. Judged by what is known local, not by a list of network
 * types: a fixed list let `fuse.*`, `virtiofs` and overlay on NFS pass as local (issue 18).
 * Bun has no statfs(2); the type comes from /proc/self/mountinfo, the kernel's own table,
 * rather than from a `stat -f` subprocess whose output format and PATH vary.
 */
import { readFileSync } from "node:fs";
import { isWithin } from "../../core/layout.ts";

/** Block and memory filesystems whose locking is one kernel's: SQLite's WAL works there. */
const LOCAL_FILESYSTEM_TYPES: ReadonlySet<string> = new Set([
  "ext2",
  "ext3",
  "ext4",
  "xfs",
  "btrfs",
  "tmpfs",
  "zfs",
  "f2fs",
]);

/** An overlay is as local as its layers; its layers may be overlays too, this deep at most. */
const MAX_OVERLAY_DEPTH = 4;

/** One line of mountinfo: where it is mounted, its type and its superblock options. */
export interface MountEntry {
  readonly point: string;
  readonly type: string;
  readonly superOptions: readonly string[];
}

export type ParsedMountinfo =
  | { readonly kind: "Parsed"; readonly mounts: readonly MountEntry[] }
  | { readonly kind: "Unparseable"; readonly line: string };

/** mountinfo escapes space, tab, newline and backslash (and commas in options) as 3-digit octal. */
function unescapeMountField(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_m, octal: string) =>
    String.fromCharCode(Number.parseInt(octal, 8)),
  );
}

const DECIMAL = /^[0-9]+$/;
const DEVICE = /^[0-9]+:[0-9]+$/;

/**
 * `ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS`.
 * A line that does not have exactly this shape makes the whole table unparseable: skipping
 * it would let a path on that very mount fall back to a parent's (local) type.
 */
function parseMountLine(line: string): MountEntry | null {
  const fields = line.split(" ");
  const separator = fields.indexOf("-", 6);
  if (separator < 0 || fields.length !== separator + 4) return null;
  const [id, parent, device, root, point] = fields;
  const type = fields[separator + 1];
  const superOptions = fields[separator + 3];
  if (id === undefined || !DECIMAL.test(id) || parent === undefined || !DECIMAL.test(parent)) {
    return null;
  }
  if (device === undefined || !DEVICE.test(device)) return null;
  if (root === undefined || point === undefined || !point.startsWith("/")) return null;
  if (type === undefined || type === "" || superOptions === undefined) return null;
  return {
    point: unescapeMountField(point),
    type,
    superOptions: superOptions.split(",").map(unescapeMountField),
  };
}

export function parseMountinfo(text: string): ParsedMountinfo {
  const mounts: MountEntry[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const entry = parseMountLine(line);
    if (entry === null) return { kind: "Unparseable", line };
    mounts.push(entry);
  }
  return mounts.length === 0 ? { kind: "Unparseable", line: "" } : { kind: "Parsed", mounts };
}

/**
 * The mount `realPath` is on: the one with the longest mount point containing it, the last
 * listed winning among equals (a later mount hides an earlier one at the same place).
 */
export function mountOf(realPath: string, mounts: readonly MountEntry[]): MountEntry | null {
  let best: MountEntry | null = null;
  for (const mount of mounts) {
    if (!isWithin(mount.point, realPath)) continue;
    if (best === null || mount.point.length >= best.point.length) best = mount;
  }
  return best;
}

/** The filesystem type of the mount `realPath` is on; null when mountinfo does not parse. */
export function filesystemTypeOf(realPath: string, mountinfo: string): string | null {
  const parsed = parseMountinfo(mountinfo);
  if (parsed.kind === "Unparseable") return null;
  return mountOf(realPath, parsed.mounts)?.type ?? null;
}

/** An overlay's layer directories: `upperdir` and each of `lowerdir`'s colon-separated ones. */
function overlayLayers(superOptions: readonly string[]): readonly string[] {
  const layers: string[] = [];
  for (const option of superOptions) {
    const eq = option.indexOf("=");
    const name = option.slice(0, eq);
    const value = option.slice(eq + 1);
    if (name === "upperdir") layers.push(value);
    // `\:` is a colon inside one layer's path; `::` separates data-only layers.
    if (name === "lowerdir" || name === "lowerdir+" || name === "datadir+") {
      for (const layer of value.split(/(?<!\\):/)) {
        if (layer !== "") layers.push(layer.replace(/\\:/g, ":"));
      }
    }
  }
  return layers;
}

function hasUpper(superOptions: readonly string[]): boolean {
  return superOptions.some((o) => o.startsWith("upperdir="));
}

type Locality =
  | { readonly kind: "Local"; readonly type: string }
  | { readonly kind: "NotLocal"; readonly type: string; readonly why: string };

/** Whether `mount` is known local; an overlay is when every layer it names is. */
function localityOf(mount: MountEntry, mounts: readonly MountEntry[], depth: number): Locality {
  if (LOCAL_FILESYSTEM_TYPES.has(mount.type)) return { kind: "Local", type: mount.type };
  if (mount.type !== "overlay") {
    return { kind: "NotLocal", type: mount.type, why: `${mount.type} is not known to be local` };
  }
  const layers = overlayLayers(mount.superOptions);
  if (layers.length === 0 || depth >= MAX_OVERLAY_DEPTH) {
    return { kind: "NotLocal", type: "overlay", why: "cannot tell what its layers are on" };
  }
  const seen = layers.map((layer) => ({ layer, under: mountOf(layer, mounts) }));
  // Layers outside this mount namespace (a container's root) resolve to the overlay itself or
  // to nothing. Such an overlay still has an upper layer, and the database lives there (every
  // write is copied up): the kernel refuses NFS and other filesystems without trusted xattrs
  // or d_type as an upper layer, so an unseen one is local. Refusing it stopped every daemon,
  // and so `npm test`, inside an ordinary container. Named layers that ARE visible are judged.
  if (seen.every((s) => s.under === null || s.under === mount)) {
    return hasUpper(mount.superOptions)
      ? { kind: "Local", type: "overlay" }
      : {
          kind: "NotLocal",
          type: "overlay",
          why: "it has no upper layer and its layers are not visible here",
        };
  }
  for (const { layer, under } of seen) {
    if (under === null || under === mount) {
      return { kind: "NotLocal", type: "overlay", why: `its layer ${layer} is not visible here` };
    }
    const verdict = localityOf(under, mounts, depth + 1);
    if (verdict.kind === "NotLocal") {
      return { kind: "NotLocal", type: `overlay on ${verdict.type}`, why: verdict.why };
    }
  }
  return { kind: "Local", type: "overlay" };
}

export type DatabaseFilesystem =
  | { readonly kind: "Local"; readonly type: string }
  | { readonly kind: "NotLocal"; readonly type: string; readonly message: string }
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
  const parsed = parseMountinfo(mountinfo);
  const mount = parsed.kind === "Parsed" ? mountOf(realDir, parsed.mounts) : null;
  if (parsed.kind === "Unparseable" || mount === null) {
    const shown =
      parsed.kind === "Unparseable" ? ` (unreadable line: ${JSON.stringify(parsed.line)})` : "";
    return {
      kind: "Unknown",
      message: `cannot tell which filesystem ${realDir} is on from /proc/self/mountinfo${shown}; pass --allow-network-db if it is local`,
    };
  }
  const locality = localityOf(mount, parsed.mounts, 0);
  if (locality.kind === "Local") return locality;
  return {
    kind: "NotLocal",
    type: locality.type,
    message: `the state dir ${realDir} is on ${locality.type}, not a filesystem known to be local (${locality.why}): SQLite's WAL locking needs one host's kernel, and on a network filesystem the database would corrupt; put --state-dir on the daemon's local disk (ext2/3/4, xfs, btrfs, tmpfs, zfs, f2fs, or an overlay of those; the spool may stay shared), or pass --allow-network-db to accept the risk`,
  };
}
