/**
 * What the pages show and what they must never show: a session's clocks, an attempt's
 * backend job id, and nothing a job or a client wrote rendered as markup, no submission
 * token and no job environment in any page.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { getAllocation } from "../../src/adapters/store-sqlite/index.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { newWorkload, startAttempt } from "../support/store-fixtures.ts";

const open: Harness[] = [];
function make(): Harness {
  const h = harness();
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

async function html(h: Harness, path: string): Promise<string> {
  const res = await h.request(path);
  expect(res.status).toBe(200);
  return await res.text();
}

describe("/ui pages", () => {
  test("sessions show idle and held time against their limits, and the last activity", async () => {
    const h = make();
    const id = newWorkload(h.store, "SESSION", {
      idleTimeoutSeconds: 600,
      maxLifetimeSeconds: 7200,
    });
    startAttempt(h.store, id);
    h.clock.advance(5 * 60_000);
    const page = await html(h, "/ui/sessions");
    const row = page.slice(page.indexOf(id), page.indexOf("</tr>", page.indexOf(id)));
    expect(row).toContain("5 min ago"); // last activity: the session's start
    expect(row).toMatch(/5 min<div class="muted">of 10 min/); // idle
    expect(row).toMatch(/5 min<div class="muted">of 2 h 0 min/); // held
    expect(page).toContain("Live (1)");
  });

  test("a row that does not decode is listed as unreadable and its page says why; the others show", async () => {
    const h = make();
    const good = newWorkload(h.store, "BATCH", { command: ["true"] });
    const bad = newWorkload(h.store, "BATCH", { command: ["true"] });
    h.sqlite.run("UPDATE workloads SET phase = 'NOT_A_PHASE' WHERE id = ?", [bad]);
    const list = await html(h, "/ui/workloads");
    expect(list).toContain(good);
    const row = list.slice(list.indexOf(bad), list.indexOf("</tr>", list.indexOf(bad)));
    expect(row).toContain("unreadable");
    expect(row).toContain("NOT_A_PHASE");
    const shown = await h.request(`/ui/workloads/${bad}`);
    expect(shown.status).toBe(200);
    expect(await shown.text()).toContain("its stored record cannot be read");
    expect((await h.request(`/ui/workloads/${good}`)).status).toBe(200);
    const session = newWorkload(h.store, "SESSION", {});
    h.sqlite.run("UPDATE workloads SET spec_json = '{broken' WHERE id = ?", [session]);
    for (const path of ["/ui/sessions", "/ui/cluster", "/ui/workloads"]) {
      expect((await h.request(path)).status).toBe(200);
    }
    const sessions = await html(h, "/ui/sessions");
    expect(sessions).toContain(`${session}</span>: its stored record cannot be read`);
  });

  test("an attempt's backend job id is shown; its submission token and the job's env are not", async () => {
    const h = make();
    const id = newWorkload(h.store, "BATCH", {
      command: ["true"],
      env: { PASSWORD_FOR_DB: "hunter2-not-for-pages" },
    });
    const allocationId = startAttempt(h.store, id);
    h.sqlite.run("UPDATE allocations SET handle = '4242' WHERE id = ?", [allocationId]);
    const token = getAllocation(h.store, allocationId)?.token ?? "";
    expect(token.length).toBeGreaterThan(10);
    for (const path of [`/ui/workloads/${id}`, "/ui/workloads", "/ui/sessions", "/ui/cluster"]) {
      const page = await html(h, path);
      expect(page).not.toContain(token);
      expect(page).not.toContain("hunter2-not-for-pages");
    }
    expect(await html(h, `/ui/workloads/${id}`)).toContain('<td class="mono">4242</td>');
  });

  test("a hostile name and message are text, never markup", async () => {
    const h = make();
    // The API refuses such a name; a store written by an older version, or by hand, may not.
    const id = newWorkload(h.store, "BATCH", { command: ["true"] });
    h.sqlite.run(
      "UPDATE workloads SET name = '<img src=x onerror=alert(1)>', message = '</pre><script>alert(2)</script>' WHERE id = ?",
      [id],
    );
    for (const path of ["/ui/workloads", `/ui/workloads/${id}`]) {
      const page = await html(h, path);
      expect(page).not.toContain("<img src=x");
      expect(page).not.toContain("<script>alert");
      expect(page).toContain("&lt;img src=x onerror=alert(1)&gt;");
    }
  });

  test("pages forward and back by key: no row twice, none skipped", async () => {
    const h = make();
    const ids: string[] = [];
    for (let i = 0; i < 120; i++) {
      h.clock.advance(1000);
      ids.push(newWorkload(h.store, "BATCH", { command: ["true"] }));
    }
    const newestFirst = [...ids].reverse();
    const idsOf = (page: string) =>
      [...page.matchAll(/<a href="\/ui\/workloads\/([^"?]+)">/g)].map((m) => m[1]);
    const linkOf = (page: string, rel: "prev" | "next") =>
      [...page.matchAll(/<a rel="(prev|next)" href="([^"]+)"/g)]
        .find((m) => m[1] === rel)?.[2]
        ?.replaceAll("&amp;", "&");
    const first = await html(h, "/ui/workloads");
    expect(idsOf(first)).toEqual(newestFirst.slice(0, 50));
    expect(linkOf(first, "prev")).toBeUndefined();
    const second = await html(h, linkOf(first, "next") ?? "");
    expect(idsOf(second)).toEqual(newestFirst.slice(50, 100));
    const third = await html(h, linkOf(second, "next") ?? "");
    expect(idsOf(third)).toEqual(newestFirst.slice(100, 120));
    expect(linkOf(third, "next")).toBeUndefined();
    const back = await html(h, linkOf(third, "prev") ?? "");
    expect(idsOf(back)).toEqual(newestFirst.slice(50, 100));
    const top = await html(h, linkOf(back, "prev") ?? "");
    expect(idsOf(top)).toEqual(newestFirst.slice(0, 50));
    expect(linkOf(top, "prev")).toBeUndefined();
  });

  test("filters by owner: a principal's workloads, or the admin's own; the owner is shown", async () => {
    const h = make();
    const mine = newWorkload(h.store, "BATCH", { command: ["true"] });
    const theirs = newWorkload(h.store, "BATCH", { command: ["true"] });
    const admins = newWorkload(h.store, "BATCH", { command: ["true"] });
    h.sqlite.run("INSERT INTO principals (name, created_at) VALUES ('alice', 0), ('bob', 0)");
    h.sqlite.run("UPDATE workloads SET owner = 'alice' WHERE id = ?", [mine]);
    h.sqlite.run("UPDATE workloads SET owner = 'bob' WHERE id = ?", [theirs]);
    const idsOf = (page: string) =>
      [...page.matchAll(/<a href="\/ui\/workloads\/([^"?]+)">/g)].map((m) => m[1]).sort();
    const alices = await html(h, "/ui/workloads?owner=alice");
    expect(idsOf(alices)).toEqual([mine]);
    expect(alices).toContain("<td>alice</td>");
    expect(alices).toContain('<option value="bob">bob</option>');
    expect(idsOf(await html(h, "/ui/workloads?owner=(admin)"))).toEqual([admins]);
    expect(idsOf(await html(h, "/ui/workloads"))).toEqual([mine, theirs, admins].sort());
  });

  test("filters by profile, phase and kind together; live counts by phase lead the list", async () => {
    const h = make();
    const a = newWorkload(h.store, "BATCH", { command: ["true"] });
    const b = newWorkload(h.store, "BATCH", { command: ["true"] });
    const c = newWorkload(h.store, "SESSION");
    h.sqlite.run("UPDATE workloads SET profile = 'interactive' WHERE id IN (?, ?)", [b, c]);
    h.sqlite.run("UPDATE workloads SET phase = 'COMPLETED' WHERE id = ?", [a]);
    const idsOf = (page: string) =>
      [...page.matchAll(/<a href="\/ui\/workloads\/([^"?]+)">/g)].map((m) => m[1]).sort();
    expect(idsOf(await html(h, "/ui/workloads?profile=interactive"))).toEqual([b, c].sort());
    expect(idsOf(await html(h, "/ui/workloads?profile=interactive&kind=SESSION"))).toEqual([c]);
    expect(idsOf(await html(h, "/ui/workloads?phase=COMPLETED"))).toEqual([a]);
    expect(idsOf(await html(h, "/ui/workloads?profile=nope"))).toEqual([]);
    const all = await html(h, "/ui/workloads");
    // Two live (PENDING), one ended: the card counts the live ones only.
    expect(all).toMatch(/<div class="label">PENDING<\/div><div class="value">2<\/div>/);
    expect(all).toMatch(/<div class="label">RUNNING<\/div><div class="value">0<\/div>/);
    // The cluster page's live use per profile: the ended workload is history, not use.
    const cluster = await html(h, "/ui/cluster");
    expect(cluster).toContain('<a href="/ui/workloads?profile=default">idle</a>');
    expect(cluster).toContain('<a href="/ui/workloads?profile=interactive">2 PENDING</a>');
  });
});
