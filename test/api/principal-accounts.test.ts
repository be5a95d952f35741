/**
 * `principal add` refuses a unix user work must never run as (issue 32): root, an account
 * below the uid floor (a system account), nobody, and one that does not exist, naming the
 * account and why, so nothing is created. The rule is the core's (accounts.ts); the accounts
 * come from the AccountLookup port, here a fixed table.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { AccountLookup, UnixAccount } from "../../src/core/accounts.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const TABLE: readonly UnixAccount[] = [
  { name: "root", uid: 0, gid: 0, groups: [0] },
  { name: "daemon", uid: 1, gid: 1, groups: [1] },
  { name: "svc", uid: 600, gid: 600, groups: [600] },
  { name: "nobody", uid: 65534, gid: 65534, groups: [65534] },
  { name: "wheelie", uid: 1002, gid: 1002, groups: [0, 1002] },
  { name: "alice", uid: 1001, gid: 1001, groups: [1001] },
];
const lookup: AccountLookup = { account: (n) => TABLE.find((a) => a.name === n) ?? null };

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const add = (h: Harness, body: unknown) =>
  h.request("/v1/principals", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

describe("principal add checks the unix user", () => {
  test("refuses root, a system account, nobody, root's group and a missing account, naming which", async () => {
    const h = harness({ accounts: { lookup, minUid: 1000 } });
    open.push(h);
    const cases: [string, RegExp][] = [
      ["root", /unix user "root": is uid 0/],
      ["daemon", /unix user "daemon": uid 1 is below the lowest uid .*\(1000/],
      ["svc", /unix user "svc": uid 600 is below/],
      ["nobody", /unix user "nobody": is nobody/],
      ["wheelie", /unix user "wheelie": is in root's group/],
      ["ghost", /unix user "ghost": no such account/],
    ];
    for (const [user, why] of cases) {
      const res = await add(h, { name: `p-${user}`, unixUser: user });
      expect({ user, status: res.status }).toEqual({ user, status: 422 });
      const problem = await problemOf(res);
      expect(problem.detail).toMatch(why);
      expect(problem.errors[0]?.path).toBe("unixUser");
      expect((problem as unknown as { reason: string }).reason).toBe("ACCOUNT_UNUSABLE");
    }
    const listed = (await (await h.request("/v1/principals")).json()) as { items: unknown[] };
    expect(listed.items).toEqual([]);
    expect((await add(h, { name: "alice", unixUser: "alice" })).status).toBe(201);
    // No unix user at all: a principal that never runs as its own account.
    expect((await add(h, { name: "bob" })).status).toBe(201);
  });

  test("the floor is the site's: a lower one admits its accounts above it", async () => {
    const h = harness({ accounts: { lookup, minUid: 500 } });
    open.push(h);
    expect((await add(h, { name: "svc", unixUser: "svc" })).status).toBe(201);
    expect((await add(h, { name: "d", unixUser: "daemon" })).status).toBe(422);
  });
});
