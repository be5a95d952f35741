/**
 * A stored row the daemon cannot parse (issue 34: one allocation whose submission token
 * did not match the pattern turned every list into a 500) is shown as unreadable, with its
 * id, and logged once; every other workload is still served, in list and show.
 */
import { afterEach, expect, test } from "bun:test";
import { harness } from "../support/api-harness.ts";

let close = () => {};
afterEach(() => close());

async function submit(h: ReturnType<typeof harness>): Promise<string> {
  const r = await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["true"] });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

test("a row with a token off the pattern is listed as unreadable; the others are served", async () => {
  const h = harness({ mintsAtAdmission: true });
  close = () => h.close();
  const ids = [await submit(h), await submit(h), await submit(h)];
  const bad = ids[1] as string;
  h.sqlite.run("UPDATE allocations SET token = 'not a token' WHERE workload_id = ?", [bad]);
  for (let i = 0; i < 2; i++) {
    const r = await h.request("/v1/workloads");
    expect(r.status).toBe(200);
    const page = (await r.json()) as {
      items: { id: string; unreadable?: boolean; message?: string; phase?: string }[];
    };
    expect(page.items.map((w) => w.id).sort()).toEqual([...ids].sort());
    const shown = page.items.find((w) => w.id === bad);
    expect(shown?.unreadable).toBe(true);
    expect(shown?.message).toContain("cannot be read");
    for (const w of page.items.filter((x) => x.id !== bad)) expect(w.phase).toBe("SUBMITTING");
    const owned = await h.request("/v1/workloads?limit=2");
    expect(owned.status).toBe(200);
  }
  for (const id of ids.filter((x) => x !== bad)) {
    expect((await h.request(`/v1/workloads/${id}`)).status).toBe(200);
  }
  const one = await h.request(`/v1/workloads/${bad}`);
  expect(one.status).toBe(200);
  expect(((await one.json()) as { unreadable?: boolean }).unreadable).toBe(true);
  const logged = h.log.lines.filter((l) => l.includes("cannot be read") && l.includes(bad));
  expect(logged).toHaveLength(1);
});
