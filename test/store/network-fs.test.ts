import { describe, expect, test } from "bun:test";
import { realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { checkDatabaseFilesystem, filesystemTypeOf } from "../../src/store/network-fs.ts";

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
});

describe("checkDatabaseFilesystem", () => {
  test("network filesystems are refused with the way out", () => {
    for (const path of ["/shared/o4s", "/shared/scratch/o4s", "/gpfs/a", "/mnt/with space/db"]) {
      const check = checkDatabaseFilesystem(path, () => MOUNTINFO);
      expect(check.kind).toBe("Network");
      expect(check.kind === "Network" && check.message).toContain("--allow-network-db");
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
