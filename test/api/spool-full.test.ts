import { afterEach, describe, expect, test } from "bun:test";
import { watchSpool } from "../../src/apps/daemon/spool-watch.ts";
import type { StatFs } from "../../src/lib/spool-space.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const MIB = 1024 * 1024;

/** A filesystem of 100 MiB whose free space the test sets. */
function fakeDisk(): { statfs: StatFs; freeMiB: number } {
  const disk = {
    freeMiB: 100,
    statfs: () => ({
      bavail: (disk.freeMiB * MIB) / 4096,
      bsize: 4096,
      blocks: (100 * MIB) / 4096,
    }),
  };
  return disk;
}

const BATCH = { kind: "BATCH", profile: "default", command: ["true"] };

describe("watchSpool", () => {
  test("the default mark is 5 % of the filesystem, at most 1 GiB; 0 refuses nothing", () => {
    const disk = fakeDisk();
    const byDefault = watchSpool({ path: "/spool", lowWaterBytes: null, statfs: disk.statfs });
    expect(byDefault.report()).toMatchObject({ lowWaterBytes: 5 * MIB, low: false, message: null });
    disk.freeMiB = 4;
    const low = byDefault.report();
    expect(low.low).toBe(true);
    expect(low.message).toContain("/spool has 4.0 MiB free of 100 MiB");
    expect(low.message).toContain("low-water mark of 5.0 MiB");
    disk.freeMiB = 0;
    const off = watchSpool({ path: "/spool", lowWaterBytes: 0, statfs: disk.statfs });
    expect(off.report().low).toBe(false);
  });

  test("a spool whose room cannot be read is low (fail closed), saying why", () => {
    const broken = watchSpool({
      path: "/spool",
      lowWaterBytes: null,
      statfs: () => {
        throw new Error("ENOENT: no such file or directory");
      },
    });
    const report = broken.report();
    expect(report).toMatchObject({ low: true, freeBytes: null });
    expect(report.message).toContain("ENOENT");
  });
});

describe("a spool below its low-water mark (API)", () => {
  test("new submissions get 503 SPOOL_FULL, diagnostics name the free space, until space returns", async () => {
    const disk = fakeDisk();
    const spool = watchSpool({ path: "/spool", lowWaterBytes: 10 * MIB, statfs: disk.statfs });
    const h = harness({ spool });
    open.push(h);

    expect((await h.post("/v1/workloads", BATCH)).status).toBe(201);
    disk.freeMiB = 3;
    const refused = await h.post("/v1/workloads", BATCH);
    expect(refused.status).toBe(503);
    const problem = await problemOf(refused);
    expect(problem.reason).toBe("SPOOL_FULL");
    expect(problem.detail).toContain("3.0 MiB free");
    expect(h.rows().workloads).toBe(1);
    // A bad body still hears what is wrong with it.
    expect((await h.post("/v1/workloads", { kind: "BATCH" })).status).toBe(400);

    const diagnostics = (await (await h.request("/v1/diagnostics")).json()) as {
      spool: Record<string, unknown>;
    };
    expect(diagnostics.spool).toMatchObject({
      path: "/spool",
      healthy: false,
      freeBytes: 3 * MIB,
      totalBytes: 100 * MIB,
      lowWaterBytes: 10 * MIB,
    });
    const metrics = await (await h.request("/metrics")).text();
    expect(metrics).toContain(`openai4s_spool_free_bytes ${3 * MIB}`);
    expect(metrics).toContain("openai4s_spool_low 1");

    disk.freeMiB = 50;
    expect((await h.post("/v1/workloads", BATCH)).status).toBe(201);
    const healthy = (await (await h.request("/v1/diagnostics")).json()) as {
      spool: Record<string, unknown>;
    };
    expect(healthy.spool).toMatchObject({ healthy: true, message: null });
  });
});
