import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  mkdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { prepareDatabaseFile, prepareSpoolDir } from "../../src/apps/daemon/state-dir.ts";
import {
  checkAncestors,
  checkFutureDir,
  checkStateDirOwnership,
  describeOwner,
} from "../../src/apps/daemon/state-ownership.ts";
import { checkLayoutSeparation, defaultSpoolDir, stateLayout } from "../../src/core/layout.ts";
import { tempDirs } from "../support/temp-dir.ts";

const uid = process.geteuid?.() ?? 0;
const tmp = tempDirs("o4s-own-", "each");

describe("state dir ownership (StrictModes)", () => {
  test("our own 0700 dir under /tmp (sticky) passes", () => {
    const state = join(tmp(), "state");
    mkdirSync(state, { mode: 0o700 });
    writeFileSync(join(state, "admin-token"), "x");
    expect(checkStateDirOwnership(state, uid)).toEqual({ kind: "Owned" });
  });

  test("a symbolic link as the state dir is refused", () => {
    const base = tmp();
    mkdirSync(join(base, "real"), { mode: 0o700 });
    symlinkSync(join(base, "real"), join(base, "link"));
    const check = checkStateDirOwnership(join(base, "link"), uid);
    expect(check.kind === "Refused" && check.message).toContain("symbolic link");
  });

  test("a group-writable parent without the sticky bit is refused; with it, accepted", () => {
    const parent = join(tmp(), "p");
    mkdirSync(join(parent, "state"), { recursive: true, mode: 0o700 });
    chmodSync(parent, 0o775);
    expect(checkAncestors(join(parent, "state"), uid).kind).toBe("Refused");
    chmodSync(parent, 0o1775);
    expect(checkAncestors(join(parent, "state"), uid).kind).toBe("Owned");
  });

  test.skipIf(uid !== 0)("under a sticky parent, a child another user owns is refused", () => {
    const parent = join(tmp(), "p");
    mkdirSync(join(parent, "theirs", "state"), { recursive: true, mode: 0o700 });
    chmodSync(parent, 0o1777);
    chownSync(join(parent, "theirs"), 65534, 65534);
    // Their directory above ours: they could rename our state dir away.
    expect(checkAncestors(join(parent, "theirs", "state"), uid).kind).toBe("Refused");
  });

  test.skipIf(uid !== 0)("a file deep in the private tree owned by another uid is named", () => {
    const state = join(tmp(), "state");
    mkdirSync(join(state, "backends", "local", "jobs", "t"), { recursive: true, mode: 0o700 });
    const record = join(state, "backends", "local", "jobs", "t", "record.json");
    writeFileSync(record, "{}");
    chownSync(record, 65534, 65534);
    const check = checkStateDirOwnership(state, uid);
    expect(check.kind === "Refused" && check.message).toContain(record);
    // The pre-split workloads/ is job territory about to move: skipped.
    rmSync(record);
    mkdirSync(join(state, "workloads"));
    chownSync(join(state, "workloads"), 65534, 65534);
    expect(checkStateDirOwnership(state, uid, { skip: ["workloads"] }).kind).toBe("Owned");
    expect(checkStateDirOwnership(state, uid).kind).toBe("Refused");
  });

  // Unit forms of the root-only guarantees (issue 18): the daemon's uid is a parameter, so a
  // directory of ours is "another user's" to a daemon running as some other uid.
  test("a state dir owned by another user is refused, naming its owner", () => {
    const state = join(tmp(), "state");
    mkdirSync(state, { mode: 0o700 });
    const check = checkStateDirOwnership(state, uid + 4242);
    expect(check.kind).toBe("Refused");
    expect(check.kind === "Refused" && check.message).toContain(`uid ${uid}`);
  });

  test("an ancestor owned by another user (not root) is refused, even 0755", () => {
    const parent = join(tmp(), "p");
    mkdirSync(join(parent, "state"), { recursive: true, mode: 0o700 });
    chmodSync(parent, 0o755);
    if (uid === 0) {
      chownSync(parent, 4242, 4242);
      const check = checkAncestors(join(parent, "state"), 0);
      expect(check.kind === "Refused" && check.message).toContain(`${parent} (above`);
    } else {
      // Not root: our own directory is foreign to a daemon of another (non-root) uid.
      const check = checkAncestors(join(parent, "state"), uid + 4242);
      expect(check.kind === "Refused" && check.message).toContain("owned by");
    }
  });

  test("every ancestor is checked, not only the parent: a group-writable grandparent is refused", () => {
    // Guards the walk's loop: stopping after the parent would let whoever can write the
    // grandparent swap the whole branch (parent and state dir) for their own.
    const grand = join(tmp(), "g");
    mkdirSync(join(grand, "p", "state"), { recursive: true, mode: 0o700 });
    chmodSync(join(grand, "p"), 0o755);
    chmodSync(grand, 0o775);
    const check = checkAncestors(join(grand, "p", "state"), uid);
    expect(check.kind === "Refused" && check.message).toContain(`${grand} (above`);
  });

  test("the walk stops at its entry cap: a tree of exactly the cap passes, one more is refused", () => {
    // Guards the count: an over-counting walk would refuse a busy but genuine state dir.
    const state = join(tmp(), "state");
    mkdirSync(join(state, "sub"), { recursive: true, mode: 0o700 });
    for (const name of ["a", "b", "sub/c", "sub/d"]) writeFileSync(join(state, name), "x");
    expect(checkStateDirOwnership(state, uid, { maxEntries: 5 })).toEqual({ kind: "Owned" });
    const over = checkStateDirOwnership(state, uid, { maxEntries: 4 });
    expect(over.kind === "Refused" && over.message).toContain("holds more than 4 entries");
  });

  test.skipIf(uid !== 0)(
    "for a daemon of another uid, root's directories are trusted, sticky /tmp included",
    () => {
      // Guards "root or ours": run as root the two are the same uid, so every check here is
      // also made for a daemon of uid 4242 over directories root owns (the temp dir's parents
      // up to the sticky /tmp, and a root-owned child under it).
      const base = join(tmp(), "p");
      mkdirSync(join(base, "state"), { recursive: true, mode: 0o700 });
      chmodSync(base, 0o755);
      expect(checkAncestors(join(base, "state"), 4242)).toEqual({ kind: "Owned" });
      expect(checkFutureDir(join(base, "new", "state"), 4242, "state dir")).toEqual({
        kind: "Owned",
      });
    },
  );

  test("owners are named by uid and passwd name", () => {
    expect(describeOwner(65534, () => "nobody:x:65534:65534::/:/bin/false\n")).toBe(
      "uid 65534 (nobody)",
    );
    expect(describeOwner(4242, () => "")).toBe("uid 4242");
  });
});

describe("layout: private dir and spool never contain each other", () => {
  test("the default spool is a sibling, outside the private dir", () => {
    expect(defaultSpoolDir("/var/lib/o4s")).toBe("/var/lib/o4s-spool");
    expect(defaultSpoolDir("/var/lib/o4s/")).toBe("/var/lib/o4s-spool");
    const layout = stateLayout("/s");
    expect(layout.workspaceDir("w").startsWith("/s/")).toBe(false);
    expect(layout.attemptRecordDir("w", "a").startsWith("/s/")).toBe(true);
    expect(checkLayoutSeparation("/s", "/s-spool")).toEqual({ kind: "Separate" });
  });

  test.each([
    ["/s", "/s/spool"],
    ["/s", "/s"],
    ["/shared/s", "/shared"],
  ])("%s with spool %s overlaps", (root, spool) => {
    expect(checkLayoutSeparation(root, spool).kind).toBe("Overlapping");
  });
});

/** Start-up trust checks no test reached before (issue 33's survivors). */
describe("start-up trust checks: spool, database files, a state dir not made yet", () => {
  test("a state dir to be made under a world-writable parent without the sticky bit is refused", () => {
    const parent = join(tmp(), "open");
    mkdirSync(parent);
    chmodSync(parent, 0o777);
    const check = checkFutureDir(join(parent, "state", "deeper"), uid, "state dir");
    expect(check.kind === "Refused" && check.message).toContain("writable by group or other");
    chmodSync(parent, 0o1777);
    expect(checkFutureDir(join(parent, "state"), uid, "state dir")).toEqual({ kind: "Owned" });
  });

  test("the spool: made 0711, tightened to 0711, refused when writable by others", () => {
    const base = tmp();
    const fresh = join(base, "spool");
    expect(prepareSpoolDir(fresh, uid)).toBeNull();
    expect(statSync(fresh).mode & 0o7777).toBe(0o711);
    chmodSync(fresh, 0o755);
    expect(prepareSpoolDir(fresh, uid)).toBeNull();
    expect(statSync(fresh).mode & 0o7777).toBe(0o711);
    for (const mode of [0o731, 0o713, 0o777]) {
      chmodSync(fresh, mode);
      expect(prepareSpoolDir(fresh, uid)).toContain("writable by group or other");
    }
  });

  test.skipIf(uid !== 0)("a spool another uid owns is refused, naming both uids", () => {
    const spool = join(tmp(), "spool");
    mkdirSync(spool, { mode: 0o711 });
    chownSync(spool, 65534, 65534);
    expect(prepareSpoolDir(spool, uid)).toBe(
      `spool dir ${spool} is owned by uid 65534, not by the daemon's uid ${uid}`,
    );
  });

  test("group- or other-readable database files (and their -wal, -shm) are tightened to 0600", () => {
    const db = join(tmp(), "openai4s.db");
    for (const file of [db, `${db}-wal`, `${db}-shm`]) writeFileSync(file, "");
    chmodSync(db, 0o640);
    chmodSync(`${db}-wal`, 0o604);
    chmodSync(`${db}-shm`, 0o644);
    prepareDatabaseFile(db);
    for (const file of [db, `${db}-wal`, `${db}-shm`]) {
      expect({ file, mode: statSync(file).mode & 0o777 }).toEqual({ file, mode: 0o600 });
    }
    const fresh = join(tmp(), "new.db");
    prepareDatabaseFile(fresh);
    expect(statSync(fresh).mode & 0o777).toBe(0o600);
  });
});
