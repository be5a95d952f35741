/**
 * Issue 33: a write that found no room answered 500 INTERNAL_ERROR and the log never named
 * what could not be written. Now: 503 STATE_DIR_FULL, nothing created, one log line with the
 * path, and the next request once there is room succeeds.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

describe("a store with no room", () => {
  test("a submission is 503 STATE_DIR_FULL, the failed write logged with its path", async () => {
    const h = harness();
    open.push(h);
    const pages = (h.sqlite.query("PRAGMA page_count").get() as { page_count: number }).page_count;
    // The store may not grow: the next insert fails as on a full disk (SQLITE_FULL).
    h.sqlite.run(`PRAGMA max_page_count = ${pages}`);
    const body = {
      kind: "BATCH",
      profile: "default",
      command: ["x"],
      env: { BIG: "y".repeat(3_000) },
    };
    // Free pages inside the file take a few; then the store is full.
    let res = await h.post("/v1/workloads", body);
    let accepted = 0;
    while (res.status === 201 && accepted < 500) {
      accepted += 1;
      res = await h.post("/v1/workloads", body);
    }
    expect(res.status).toBe(503);
    expect((await problemOf(res)).reason).toBe("STATE_DIR_FULL");
    expect(h.rows().workloads).toBe(accepted);
    const lines = h.log.lines.filter((l) => l.includes("want of space"));
    expect(lines.length).toBe(1);
    expect(lines[0]).toContain('"path"');
    expect(lines[0]).toContain("SQLITE_FULL");

    h.sqlite.run("PRAGMA max_page_count = 1073741823");
    expect((await h.post("/v1/workloads", body)).status).toBe(201);
  });
});
