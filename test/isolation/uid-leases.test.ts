/**
 * A uid per workload, leased from a range by owning the workspace (issue 18): never two
 * workspaces on one uid, the same uid for a workload's later attempts and after a restart,
 * no reuse while a workspace of the earlier holder remains, never nobody or the "no uid",
 * and no chown through a link. Root only: leasing is chowning.
 */
import { describe, expect, test } from "bun:test";
import { lstatSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { leasedIdentities, namedIdsOf } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { tempDirs } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const tmp = tempDirs("o4s-uid-lease-", "each");

/** A spool's workloads dir with `names` workspaces made (root-owned, as the preparer makes them). */
function spool(...names: string[]): { dir: string; ws: (n: string) => string } {
  const dir = join(tmp(), "workloads");
  const ws = (n: string) => join(dir, n, "workspace");
  for (const n of names) mkdirSync(ws(n), { recursive: true, mode: 0o700 });
  return { dir, ws };
}

describe.if(IS_ROOT)("leased uids", () => {
  test("two workspaces, two uids; each owns its workspace; a later claim keeps it", () => {
    const s = spool("a", "b");
    const ids = leasedIdentities({ range: { first: 70000, last: 70009 }, workloadsDir: s.dir });
    const a = ids.claim(s.ws("a"));
    const b = ids.claim(s.ws("b"));
    expect(a?.uid).not.toBe(b?.uid);
    expect(a).toMatchObject({ gid: a?.uid });
    expect(lstatSync(s.ws("a")).uid).toBe(a?.uid as number);
    expect(lstatSync(s.ws("b")).gid).toBe(b?.uid as number);
    expect(ids.claim(s.ws("a"))?.uid).toBe(a?.uid as number);
  });

  test("after a restart the spool is the record: held uids stay held, new ones differ", () => {
    const s = spool("a", "b");
    const range = { first: 70000, last: 70009 };
    const before = leasedIdentities({ range, workloadsDir: s.dir });
    const a = before.claim(s.ws("a"))?.uid;
    const b = before.claim(s.ws("b"))?.uid;
    const after = leasedIdentities({ range, workloadsDir: s.dir });
    mkdirSync(s.ws("c"), { recursive: true });
    const c = after.claim(s.ws("c"))?.uid;
    expect([a, b]).not.toContain(c);
    expect(after.claim(s.ws("b"))?.uid).toBe(b as number);
  });

  test("a full range refuses, naming it; a removed workspace frees its uid", () => {
    const s = spool("a", "b", "c");
    const ids = leasedIdentities({ range: { first: 70000, last: 70001 }, workloadsDir: s.dir });
    const a = ids.claim(s.ws("a"))?.uid;
    ids.claim(s.ws("b"));
    expect(() => ids.claim(s.ws("c"))).toThrow(/no free uid in 70000-70001/);
    // Its files still there: the earlier holder's uid is not handed on.
    expect(lstatSync(s.ws("c")).uid).toBe(0);
    rmSync(join(s.dir, "a"), { recursive: true });
    expect(ids.claim(s.ws("c"))?.uid).toBe(a as number);
  });

  test("a uid a live process runs as is not leased, even with no workspace of it left", () => {
    const s = spool("a", "b");
    const ids = leasedIdentities({
      range: { first: 70000, last: 70002 },
      workloadsDir: s.dir,
      liveUids: () => [70000, 70002, 0],
    });
    expect(ids.claim(s.ws("a"))?.uid).toBe(70001);
    expect(() => ids.claim(s.ws("b"))).toThrow(/no free uid/);
  });

  test("a uid or gid that names someone in passwd or group is never leased", () => {
    const named = namedIdsOf("ada:x:70000:100::/home/ada:/bin/sh\n", "lab:x:70001:\n");
    expect([...named].sort()).toEqual([70000, 70001]);
    const s = spool("a", "b");
    const ids = leasedIdentities({
      range: { first: 70000, last: 70002 },
      workloadsDir: s.dir,
      namedIds: named,
    });
    expect(ids.claim(s.ws("a"))?.uid).toBe(70002);
    expect(() => ids.claim(s.ws("b"))).toThrow(/no free uid/);
  });

  test("an account the site made for a lease (o4slease<UID>, its own uid) does not name anyone", () => {
    const named = namedIdsOf(
      "o4slease70000:x:70000:70000::/nonexistent:/bin/sh\no4slease70009:x:70001:70001::/:/bin/sh\n",
      "o4slease70000:x:70000:\no4slease70009:x:70001:\n",
    );
    // A name that does not match its own id is someone's (or a mistake): still never leased.
    expect([...named].sort()).toEqual([70001]);
  });

  test("nobody (65534) and 65535 are never leased, whatever the range", () => {
    const s = spool("a", "b", "c");
    const ids = leasedIdentities({ range: { first: 65533, last: 65536 }, workloadsDir: s.dir });
    const uids = ["a", "b"].map((n) => ids.claim(s.ws(n))?.uid);
    expect(uids.sort()).toEqual([65533, 65536]);
    expect(() => ids.claim(s.ws("c"))).toThrow(/no free uid/);
  });

  test("a workspace that is a symbolic link is refused, and nothing is chowned through it", () => {
    const s = spool();
    const target = join(tmp(), "elsewhere");
    mkdirSync(target);
    mkdirSync(join(s.dir, "evil"), { recursive: true });
    symlinkSync(target, s.ws("evil"));
    const ids = leasedIdentities({ range: { first: 70000, last: 70009 }, workloadsDir: s.dir });
    expect(() => ids.claim(s.ws("evil"))).toThrow(/not a directory/);
    expect(lstatSync(target).uid).toBe(0);
  });
});
