/**
 * Run as the owner (issue 22): a principal's job on a `run_as = "owner"` profile runs as the
 * principal's unix account (uid, primary gid, supplementary groups) and its workspace is
 * given to that account; never uid 0, a system account below the minimum, nobody or root's
 * group; the admin (no account) and a principal without one are refused by name. A step
 * that cannot say whose it is finds the account from the workspace's owner. Pure parts run
 * everywhere; the chowns need root.
 */
import { describe, expect, test } from "bun:test";
import { chownSync, lstatSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { dropArgv } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import { ownerIdentities } from "../../src/adapters/isolation-bwrap/owner-identities.ts";
import {
  identityDatabaseAccounts,
  ownerAccount,
  ownerModeRefusal,
  parseMinOwnerUid,
} from "../../src/adapters/isolation-bwrap/run-as.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { tempDirs } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const tmp = tempDirs("o4s-owner-ids-", "each");

const DB = identityDatabaseAccounts({
  passwd: [
    "root:x:0:0:root:/root:/bin/bash",
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin",
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
    "alice:x:71001:71001::/home/alice:/bin/bash",
    "bob:x:71002:71002::/home/bob:/bin/bash",
    "mallory:x:71003:0::/home/mallory:/bin/bash",
    "eve:x:71004:71004::/home/eve:/bin/bash",
    "dave:x:71005:71005::/home/dave:/bin/bash",
  ].join("\n"),
  group: [
    "root:x:0:eve",
    "alice:x:71001:",
    "bob:x:71002:",
    "eve:x:71004:",
    "lab:x:72000:alice,bob",
    "gpu:x:72001:carol,alice",
  ].join("\n"),
});

describe("the owner's account", () => {
  test("its uid, primary gid and every group that lists it", () => {
    const got = ownerAccount("alice", DB, 1000);
    expect(got).toEqual({
      kind: "Resolved",
      runAs: {
        uid: 71001,
        gid: 71001,
        groups: [71001, 72000, 72001],
        label: "alice (owner)",
        account: "alice",
      },
    });
  });

  test.each([
    ["root", /uid 0/],
    ["daemon", /below the lowest uid jobs may run as \(1000/],
    ["nobody", /nobody/],
    ["mallory", /root's group/],
    ["eve", /root's group/],
    ["carol", /no such account/],
    ["../etc", /not a user name/],
  ])("%s is refused", (user, why) => {
    const got = ownerAccount(user, DB, 1000);
    expect(got.kind).toBe("Invalid");
    if (got.kind === "Invalid") expect(got.message).toMatch(why);
  });

  test("uid 0 is refused even under a minimum of 0", () => {
    expect(ownerAccount("root", DB, 0)).toMatchObject({
      kind: "Invalid",
      message: expect.stringMatching(/uid 0/),
    });
  });

  test("the minimum uid is the admin's: a higher one refuses an ordinary account", () => {
    expect(ownerAccount("alice", DB, 80000).kind).toBe("Invalid");
    expect(parseMinOwnerUid(undefined)).toBe(1000);
    expect(parseMinOwnerUid("500")).toBe(500);
    expect(parseMinOwnerUid("0")).toHaveProperty("error");
    expect(parseMinOwnerUid("1k")).toHaveProperty("error");
  });

  test("the drop keeps the owner's groups, and a lease's none", () => {
    const alice = ownerAccount("alice", DB, 1000);
    if (alice.kind !== "Resolved") throw new Error("alice");
    expect(dropArgv(alice.runAs, ["id"])).toContain("--groups=71001,72000,72001");
    expect(dropArgv(alice.runAs, ["id"])).not.toContain("--clear-groups");
    expect(dropArgv({ uid: 61200, gid: 61200, label: "lease" }, ["id"])).toContain(
      "--clear-groups",
    );
    expect(() => dropArgv({ uid: 5, gid: 5, groups: [0], label: "x" }, ["id"])).toThrow(
      /never root's group/,
    );
  });

  test("owner profiles need a root daemon: refused at start, naming the profile", () => {
    const owner = new Set(["gpu"]);
    expect(ownerModeRefusal(owner, { kind: "DaemonUid" })).toMatch(/"gpu".*root/);
    const leased = { kind: "Leased", range: { first: 61184, last: 65519 } } as const;
    expect(ownerModeRefusal(owner, leased)).toBeNull();
    expect(ownerModeRefusal(new Set(), { kind: "DaemonUid" })).toBeNull();
  });
});

/** Identities over `base` with alice and bob as principals (carol has no unix user). */
function identities(ownerProfiles: readonly string[]) {
  const principals = new Map<string, string | null>([
    ["alice", "alice"],
    ["bob", "bob"],
    ["carol", null],
  ]);
  return ownerIdentities({
    base: fixedIdentities({ uid: 65534, gid: 65534, label: "nobody" }),
    runsAsOwner: (p) => ownerProfiles.includes(p),
    anyRunsAsOwner: () => ownerProfiles.length > 0,
    unixUserOf: (p) => principals.get(p) ?? null,
    isPrincipalAccount: (u) => [...principals.values()].includes(u),
    accounts: DB,
    minUid: 1000,
  });
}

function workspace(): string {
  const dir = join(tmp(), "workloads", "w1", "workspace");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

describe("who a launch runs as", () => {
  test("an owner profile refuses the admin and a principal without an account, by name", () => {
    const ids = identities(["gpu"]);
    const ws = workspace();
    expect(() => ids.claim(ws, { profile: "gpu", owner: null })).toThrow(
      /profile "gpu" runs work as its owner's unix account, and the admin has none/,
    );
    expect(() => ids.claim(ws, { profile: "gpu", owner: "carol" })).toThrow(
      /principal "carol" has no unix user/,
    );
  });

  test("another profile keeps the admin's choice", () => {
    const ids = identities(["gpu"]);
    expect(ids.claim(workspace(), { profile: "cpu", owner: "alice" })?.label).toBe("nobody");
  });

  test.if(IS_ROOT)("an owner profile gives the workspace to the owner; a step finds it", () => {
    const ids = identities(["gpu"]);
    const ws = workspace();
    const runAs = ids.claim(ws, { profile: "gpu", owner: "alice" });
    expect(runAs).toMatchObject({ uid: 71001, gid: 71001, account: "alice" });
    expect(lstatSync(ws)).toMatchObject({ uid: 71001, gid: 71001 });
    // A step (or an upload) that cannot say whose launch it is: the workspace's owner.
    expect(ids.claim(ws)).toMatchObject({ uid: 71001, groups: [71001, 72000, 72001] });
  });

  test.if(IS_ROOT)("a workspace owned by no principal's account keeps the admin's choice", () => {
    const ids = identities(["gpu"]);
    const ws = workspace();
    expect(ids.claim(ws)?.label).toBe("nobody");
    // dave has an account but is no principal: a step never becomes dave.
    chownSync(ws, 71005, 71005);
    expect(ids.claim(ws)?.label).toBe("nobody");
  });
});
