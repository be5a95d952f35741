import { describe, expect, test } from "bun:test";
import { realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import {
  checkDatabaseFilesystem,
  filesystemTypeOf,
  parseMountinfo,
} from "../../src/adapters/store-sqlite/network-fs.ts";

const MOUNTINFO = [
  "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
  "30 22 0:40 / /tmp rw,nosuid shared:2 - tmpfs tmpfs rw",
  "40 22 0:50 / /shared rw,relatime shared:3 - nfs4 server:/export rw,vers=4.2",
  "41 40 0:51 / /shared/scratch rw,relatime shared:4 - lustre 10.0.0.1@tcp:/fs rw",
  "42 22 0:52 / /mnt/with\\040space rw master:7 - cifs //srv/share rw",
  "43 22 0:53 / /gpfs rw shared:5 opt:1 - gpfs /dev/gpfs0 rw",
  "44 22 8:2 / /home rw - xfs /dev/sda2 rw",
  "45 22 0:54 / /home rw - nfs srv:/home rw",
].join("\n");

describe("filesystemTypeOf: the longest mount point containing the path wins", () => {
  test.each([
    ["/var/lib/openai4s", "ext4"],
    ["/tmp/x", "tmpfs"],
    ["/shared/o4s", "nfs4"],
    ["/shared/scratch/o4s", "lustre"],
    ["/sharedx/o4s", "ext4"],
    ["/mnt/with space/db", "cifs"],
    ["/gpfs/a", "gpfs"],
    // A later mount over the same point hides the earlier one.
    ["/home/ada/.local/state/openai4s", "nfs"],
  ])("%s is on %s", (path, type) => {
    expect(filesystemTypeOf(path, MOUNTINFO)).toBe(type);
  });

  test("text that is not mountinfo gives no answer", () => {
    expect(filesystemTypeOf("/x", "garbage\n")).toBeNull();
  });

  test("a mount point with two escaped characters is read whole", () => {
    const table = [
      "22 1 8:1 / / rw - ext4 /dev/sda1 rw",
      "50 22 0:50 / /mnt/a\\040b\\040c rw - nfs4 srv:/x rw",
      "51 22 0:51 / /mnt/x\\134y\\011z rw shared:5 - cifs //srv/s rw",
    ].join("\n");
    expect(filesystemTypeOf("/mnt/a b c/state", table)).toBe("nfs4");
    expect(filesystemTypeOf("/mnt/x\\y\tz/state", table)).toBe("cifs");
    // The escapes are not a prefix of a longer name.
    expect(filesystemTypeOf("/mnt/a b cd/state", table)).toBe("ext4");
  });
});

describe("parseMountinfo: a line of the wrong shape makes the whole table unreadable", () => {
  test.each([
    ["no separator", "45 22 0:54 / /home rw nfs srv:/home rw"],
    ["a field missing after the separator", "45 22 0:54 / /home rw - nfs srv:/home"],
    ["a field too many after the separator", "45 22 0:54 / /home rw - nfs srv:/home rw x"],
    ["a mount point that is not a path", "45 22 0:54 / home rw - nfs srv:/home rw"],
    ["ids that are not numbers", "4x 22 0:54 / /home rw - nfs srv:/home rw"],
    ["a device that is not major:minor", "45 22 054 / /home rw - nfs srv:/home rw"],
  ])("%s", (_label, line) => {
    const table = `${MOUNTINFO}\n${line}\n`;
    expect(parseMountinfo(table)).toEqual({ kind: "Unparseable", line });
    // Skipping it would have judged /home by the xfs line above: never Local.
    expect(checkDatabaseFilesystem("/home/ada/state", () => table).kind).toBe("Unknown");
  });

  test("an empty table is unreadable too", () => {
    expect(parseMountinfo("\n").kind).toBe("Unparseable");
    expect(checkDatabaseFilesystem("/x", () => "").kind).toBe("Unknown");
  });
});

describe("checkDatabaseFilesystem: only what is known local passes", () => {
  const ROOT = "22 1 8:1 / / rw - ext4 /dev/sda1 rw";
  const table =
    (...lines: string[]) =>
    () =>
      [ROOT, ...lines].join("\n");

  test.each(["ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs"])(
    "%s is local",
    (type) => {
      const check = checkDatabaseFilesystem(
        "/srv/o4s",
        table(`60 22 0:60 / /srv rw - ${type} x rw`),
      );
      expect(check).toEqual({ kind: "Local", type });
    },
  );

  test.each([
    "fuse.mystery",
    "fuse.sshfs",
    "virtiofs",
    "9p",
    "vboxsf",
    "squashfs",
    // The network filesystems an HPC site has, each by its own name (issue 33's survivors).
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "lustre",
    "gpfs",
    "ceph",
    "fuse.ceph-fuse",
    "beegfs",
    "fuse.glusterfs",
  ])("%s is refused, naming the flag", (type) => {
    const check = checkDatabaseFilesystem("/srv/o4s", table(`60 22 0:60 / /srv rw - ${type} x rw`));
    expect(check.kind).toBe("NotLocal");
    expect(check.kind === "NotLocal" && check.message).toContain(type);
    expect(check.kind === "NotLocal" && check.message).toContain("--allow-network-db");
  });

  test("an overlay is local when its upper and every lower layer are", () => {
    const overlay =
      "70 22 0:70 / /srv rw - overlay overlay rw,lowerdir=/var/l1:/var/l2,upperdir=/var/up,workdir=/var/work";
    expect(checkDatabaseFilesystem("/srv/o4s", table(overlay))).toEqual({
      kind: "Local",
      type: "overlay",
    });
    // The newer form: one lowerdir+ option per layer.
    const plus =
      "70 22 0:70 / /srv rw - overlay overlay rw,lowerdir+=/var/l1,lowerdir+=/var/l2,upperdir=/var/up,workdir=/var/work";
    expect(checkDatabaseFilesystem("/srv/o4s", table(plus)).kind).toBe("Local");
  });

  test("overlays on overlays are followed four deep; a fifth is not judged, so refused", () => {
    // Guards the depth cap's boundary and where it starts counting: the chain /o1 .. /oN,
    // each overlay's layers on the next, the last one's on the ext4 root.
    const chain = (n: number) =>
      Array.from({ length: n }, (_, i) => {
        const under = i + 1 < n ? `/o${i + 2}` : "/var";
        return `${70 + i} 22 0:${70 + i} / /o${i + 1} rw - overlay overlay rw,lowerdir=${under}/l,upperdir=${under}/u,workdir=${under}/w`;
      });
    expect(checkDatabaseFilesystem("/o1/db", table(...chain(4)))).toEqual({
      kind: "Local",
      type: "overlay",
    });
    const five = checkDatabaseFilesystem("/o1/db", table(...chain(5)));
    expect(five.kind).toBe("NotLocal");
    expect(five.kind === "NotLocal" && five.message).toContain(
      "cannot tell what its layers are on",
    );
  });

  test("an overlay with a layer on NFS is refused, naming what is under it", () => {
    const nfs = "61 22 0:61 / /shared rw - nfs4 srv:/x rw";
    for (const options of [
      "rw,lowerdir=/shared/l1,upperdir=/var/up,workdir=/var/work",
      "rw,lowerdir=/var/l1:/shared/l2,upperdir=/var/up,workdir=/var/work",
      "rw,lowerdir=/var/l1,upperdir=/shared/up,workdir=/shared/work",
    ]) {
      const overlay = `70 22 0:70 / /srv rw - overlay overlay ${options}`;
      const check = checkDatabaseFilesystem("/srv/o4s", table(nfs, overlay));
      expect(check.kind === "NotLocal" && check.type).toBe("overlay on nfs4");
    }
  });

  test("a container's root (an overlay whose layers are not visible here) is local by its upper layer", () => {
    // The kernel takes no NFS as an overlay's upper layer, and the database lives there.
    const containerRoot =
      "90 80 0:90 / / rw - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A,upperdir=/var/lib/docker/overlay2/x/diff,workdir=/var/lib/docker/overlay2/x/work";
    expect(checkDatabaseFilesystem("/var/lib/o4s", () => containerRoot).kind).toBe("Local");
    // Read-only (no upper) and unseen: nothing to judge it by.
    const readOnly = "90 80 0:90 / / ro - overlay overlay ro,lowerdir=/a:/b";
    expect(checkDatabaseFilesystem("/var/lib/o4s", () => readOnly).kind).toBe("NotLocal");
    const noLayers = "70 22 0:70 / /srv rw - overlay overlay rw";
    expect(checkDatabaseFilesystem("/srv/o4s", table(noLayers)).kind).toBe("NotLocal");
  });
});

describe("checkDatabaseFilesystem", () => {
  test("network filesystems are refused with the way out", () => {
    for (const path of ["/shared/o4s", "/shared/scratch/o4s", "/gpfs/a", "/mnt/with space/db"]) {
      const check = checkDatabaseFilesystem(path, () => MOUNTINFO);
      expect(check.kind).toBe("NotLocal");
      expect(check.kind === "NotLocal" && check.message).toContain("--allow-network-db");
    }
    expect(checkDatabaseFilesystem("/var/lib/o4s", () => MOUNTINFO)).toEqual({
      kind: "Local",
      type: "ext4",
    });
  });

  test("no mountinfo is Unknown (fails closed), never Local", () => {
    const check = checkDatabaseFilesystem("/x", () => {
      throw new Error("ENOENT");
    });
    expect(check.kind).toBe("Unknown");
  });

  test("this machine's temp dir, from the real /proc/self/mountinfo, is local", () => {
    expect(checkDatabaseFilesystem(realpathSync(tmpdir())).kind).toBe("Local");
  });
});
