/**
 * Accounts are looked up through NSS (issue 32), not by reading /etc/passwd: at an HPC site
 * the scientists are LDAP or SSSD accounts that file never names, and `principal add
 * --unix-user`, a first MUNGE or OIDC sign-in and a job on a `run_as = "owner"` profile
 * refused them as "no such account".
 *
 * Three layers: the adapter's contract against a getent written here (its answers, exit 2 as
 * "no such account", a hang, a flood, a malformed entry, the cache); the machine's real
 * getent; and, where this machine's nsswitch.conf names libnss-extrausers (root only), an
 * account that exists only in that NSS source, accepted where the daemon checks accounts.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  getentAccounts,
  NssLookupError,
  systemAccounts,
} from "../../src/adapters/accounts-nss/getent-accounts.ts";
import { ownerAccount } from "../../src/adapters/isolation-bwrap/run-as.ts";
import { composeSiteIdentity } from "../../src/apps/daemon/composition/site-identity.ts";
import { checkAccount } from "../../src/core/accounts.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { createExtrausersAccount, extrausersConfigured } from "../support/extrausers-account.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tmp = tempDirs("o4s-nss-", "each");

/**
 * A getent that knows one account, `ldapann` (uid 71500, in group lab 72500), and some
 * misbehaving keys; every run is counted in `calls`.
 */
function fakeGetent(dir: string): { program: string; calls: () => number } {
  const program = join(dir, "getent");
  const counter = join(dir, "calls");
  writeFileSync(counter, "");
  writeFileSync(
    program,
    `#!/bin/sh
echo x >> '${counter}'
case "$1 $2" in
  "passwd ldapann"|"passwd 71500") echo 'ldapann:*:71500:71500:Ann (LDAP):/home/ldapann:/bin/bash' ;;
  "initgroups ldapann") echo 'ldapann               72500 71500' ;;
  "group lab") echo 'lab:*:72500:ldapann' ;;
  "passwd slow") sleep 30 ;;
  "passwd flood") yes 'flood:x:71600:71600::/:/bin/sh' ;;
  "passwd short") echo 'short:x:71700:71700' ;;
  "passwd twice") printf 'twice:x:1:1::/:/bin/sh\\ntwice:x:2:2::/:/bin/sh\\n' ;;
  "passwd 71800") echo 'other:x:71801:71801::/:/bin/sh' ;;
  "passwd broken") echo 'getent: broken' >&2; exit 1 ;;
  "passwd Ann") echo 'ann:x:71900:71900::/:/bin/sh' ;;
  *) exit 2 ;;
esac
`,
  );
  chmodSync(program, 0o755);
  return { program, calls: () => readFileSync(counter, "utf8").length / 2 };
}

describe("the NSS adapter's contract (a getent written here)", () => {
  const clock = manualClock();
  const over = (program: string, cacheTtlMs = 0) =>
    getentAccounts({
      getent: program,
      path: "/usr/bin:/bin",
      timeoutMs: 500,
      cacheTtlMs,
      now: () => clock.now(),
    });

  test("an account NSS knows: its uid, primary gid and every group NSS puts it in", () => {
    const { program } = fakeGetent(tmp());
    const accounts = over(program);
    expect(accounts.account("ldapann")).toEqual({
      name: "ldapann",
      uid: 71500,
      gid: 71500,
      groups: [71500, 72500],
    });
    expect(accounts.nameOfUid(71500)).toBe("ldapann");
    expect(accounts.groupId("lab")).toBe(72500);
    // It is no line of this machine's /etc/passwd, and the owner rule takes it.
    expect(readFileSync("/etc/passwd", "utf8")).not.toContain("ldapann");
    expect(checkAccount("ldapann", accounts, 1000).kind).toBe("Usable");
    expect(ownerAccount("ldapann", accounts, 1000)).toMatchObject({
      kind: "Resolved",
      runAs: { uid: 71500, gid: 71500, groups: [71500, 72500], account: "ldapann" },
    });
  });

  test("exit 2 is no such account; what is not a name never reaches getent", () => {
    const { program, calls } = fakeGetent(tmp());
    const accounts = over(program);
    expect(accounts.account("nobodyknows")).toBeNull();
    expect(accounts.nameOfUid(4242)).toBeNull();
    expect(accounts.groupId("nogroupknown")).toBeNull();
    expect(checkAccount("nobodyknows", accounts, 1000)).toMatchObject({
      kind: "Unusable",
      problem: "no-such-account",
    });
    const before = calls();
    // A uid spelled as a name, an option, a path: getent would read them as something else.
    for (const key of ["71500", "-s", "--help", "a/b", "x".repeat(40), ""]) {
      expect(accounts.account(key)).toBeNull();
    }
    expect(calls()).toBe(before);
  });

  test("a hang, a flood, a malformed or mismatched entry and a failing getent throw, as broken NSS", () => {
    const { program } = fakeGetent(tmp());
    const accounts = over(program);
    const started = performance.now();
    expect(() => accounts.account("slow")).toThrow(/no answer within 500 ms/);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(() => accounts.account("flood")).toThrow(NssLookupError);
    expect(() => accounts.account("short")).toThrow(/unreadable entry/);
    expect(() => accounts.account("twice")).toThrow(/expected one entry/);
    expect(() => accounts.nameOfUid(71800)).toThrow(/answered for uid 71801/);
    expect(() => accounts.account("broken")).toThrow(/exited 1: getent: broken/);
    // A case-folding source's answer for another spelling is not the account asked for.
    expect(accounts.account("Ann")).toBeNull();
    expect(() => over(join(tmp(), "missing")).account("ldapann")).toThrow(NssLookupError);
  });

  test("answers are reused for the TTL, then asked again", () => {
    const { program, calls } = fakeGetent(tmp());
    const accounts = over(program, 5_000);
    expect(accounts.account("ldapann")?.uid).toBe(71500);
    const afterFirst = calls();
    expect(afterFirst).toBe(2); // passwd, initgroups
    expect(accounts.account("ldapann")?.uid).toBe(71500);
    expect(accounts.account("nobodyknows")).toBeNull();
    expect(accounts.account("nobodyknows")).toBeNull();
    expect(calls()).toBe(afterFirst + 1);
    clock.advance(5_000);
    expect(accounts.account("ldapann")?.uid).toBe(71500);
    expect(calls()).toBe(afterFirst + 3);
  });
});

describe("this machine's getent", () => {
  test("root is uid 0 and is found by uid; an unknown name is none", () => {
    const accounts = systemAccounts(manualClock());
    expect(accounts.account("root")).toMatchObject({ name: "root", uid: 0, gid: 0 });
    expect(accounts.nameOfUid(0)).toBe("root");
    expect(accounts.groupId("root")).toBe(0);
    expect(accounts.account("o4snosuchaccount")).toBeNull();
    expect(checkAccount("root", accounts, 1000)).toMatchObject({ problem: "root" });
  });
});

describe.skipIf(!extrausersConfigured())(
  "an account only in another NSS source (libnss-extrausers)",
  () => {
    test("is found, may own work, and may sign in; /etc/passwd never names it", () => {
      const account = createExtrausersAccount();
      try {
        const { user, uid } = account;
        expect(readFileSync("/etc/passwd", "utf8")).not.toContain(user);
        const clock = manualClock();
        const accounts = systemAccounts(clock);
        expect(accounts.account(user)).toMatchObject({ name: user, uid, gid: account.gid });
        expect(accounts.account(user)?.groups).toContain(account.gid);
        expect(accounts.nameOfUid(uid)).toBe(user);
        // What `principal add --unix-user` and a run-as-owner job check.
        expect(checkAccount(user, accounts, 1000).kind).toBe("Usable");
        expect(ownerAccount(user, accounts, 1000).kind).toBe("Resolved");
        // What a first MUNGE or OIDC sign-in checks.
        const identity = composeSiteIdentity(
          { oidc: null, munge: { socket: null, createPrincipals: true }, usersSocket: null },
          {},
          clock,
        );
        if (identity === null || "error" in identity) throw new Error("no site identity");
        expect(identity.accountRefusal(user)).toBeNull();
      } finally {
        account.remove();
      }
    });
  },
);
