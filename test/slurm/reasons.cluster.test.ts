/**
 * Reasons that say what to do, staged on the REAL cluster (scripts/slurm-test-cluster.sh):
 * a job killed for its memory, an administrator's scancel, a job held while pending behind
 * drained nodes, and a node set DOWN under a running job. Each test puts the nodes back the
 * way it found them; the tests run one after another in this file.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createSlurmBackend, type SlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import type { ObservationTarget } from "../../src/core/ports/allocation-backend.ts";
import { hintFor } from "../../src/core/reason-hints.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { eventually } from "../support/eventually.ts";
import {
  adminCommand,
  handleOf,
  inPhase,
  realBroker,
  type TestCluster,
  testCluster,
  waitForObservation,
} from "../support/slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request, target } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const PLACEMENTS = catalog({
  cpu: BASE_PLACEMENT,
  small: { ...BASE_PLACEMENT, memoryMb: 50 },
  // Never submitted to: the profile an out-of-memory end should point to.
  "big-mem": { ...BASE_PLACEMENT, memoryMb: 4_000 },
});

describe.skipIf(testCluster === null)("slurm-cluster reasons", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let backend: SlurmBackend;
  const submitted: ObservationTarget[] = [];

  const admin = (...args: string[]): string => adminCommand(cluster, ...args);

  async function nodesIdle(deadlineMs: number): Promise<void> {
    const back = () => {
      const states = admin("sinfo", "-h", "-N", "-o", "%t").trim().split("\n");
      if (states.every((s) => s === "idle" || s === "mix" || s === "alloc")) return true;
      throw new Error(`nodes not back: ${states.join(",")}`);
    };
    await eventually(back, { timeoutMs: deadlineMs, intervalMs: 250 });
  }

  async function submit(profile: string, argv: readonly string[]): Promise<ObservationTarget> {
    const req = request(dir, command(argv), { profile });
    const t = target(req, handleOf((await backend.submit([req])).get(req.token)));
    submitted.push(t);
    return t;
  }

  beforeAll(() => {
    dir = makeTempDir("o4s-slurm-reasons-");
    backend = createSlurmBackend({
      broker: realBroker(cluster),
      placements: PLACEMENTS,
      clock: systemClock,
      log: silentLog,
    });
  });

  afterEach(async () => {
    admin("scontrol", "update", "nodename=n1,n2", "state=RESUME");
    await nodesIdle(20_000);
  });

  afterAll(async () => {
    await backend.cancel(submitted);
    removeDir(dir);
  });

  test("a job that uses more memory than it asked for ends OUT_OF_MEMORY, with the numbers", async () => {
    const t = await submit("small", [
      "/usr/bin/python3",
      "-c",
      "import time; a = bytearray(300 * 1024 * 1024); time.sleep(30)",
    ]);
    const o = await waitForObservation(backend, t, inPhase("FAILED"), 60_000);
    expect(o).toMatchObject({ kind: "Observed", phase: "FAILED", reason: "OUT_OF_MEMORY" });
    if (o.kind !== "Observed") throw new Error("unreachable");
    const match =
      /^OUT_OF_MEMORY: used ([0-9]+) MiB of the 50 MiB asked for: ask for more memory \(profile with more memory: ([a-z-]+)\)$/.exec(
        o.message ?? "",
      );
    expect(match).not.toBeNull();
    // The smallest profile above what it used: cpu (100 MB) if the kill came early, else big-mem.
    expect(match?.[2]).toBe(Number(match?.[1]) * 1024 ** 2 < 100 * 1024 ** 2 ? "cpu" : "big-mem");
    // The person-facing hint (what a workload view shows) is that explanation, figures first.
    expect(hintFor(o.reason, o.message)).toBe(
      `used ${match?.[1]} MiB of the 50 MiB asked for: ask for more memory (profile with more memory: ${match?.[2]})`,
    );
  }, 70_000);

  test("a cancel from outside the daemon (an administrator's scancel) is ADMIN_CANCELLED", async () => {
    const t = await submit("cpu", ["/bin/sleep", "600"]);
    await waitForObservation(backend, t, inPhase("RUNNING"), 30_000);
    admin("scancel", t.handle);
    const o = await waitForObservation(backend, t, inPhase("CANCELLED"), 30_000);
    expect(o).toMatchObject({ phase: "CANCELLED", reason: "ADMIN_CANCELLED", exitCode: null });
  }, 70_000);

  test("pending behind drained nodes is NODES_UNAVAILABLE; held by an administrator is HELD", async () => {
    admin("scontrol", "update", "nodename=n1,n2", "state=DRAIN", "reason=o4s-test");
    const t = await submit("cpu", ["/bin/sleep", "600"]);
    const waiting = await waitForObservation(
      backend,
      t,
      (o) => o.kind === "Observed" && o.phase === "QUEUED" && o.reason === "NODES_UNAVAILABLE",
      30_000,
    );
    // The scheduler's words name "partitions"; what leaves the backend is rewritten later
    // (public-messages.ts), the reason code itself names nothing.
    expect(waiting).toMatchObject({ phase: "QUEUED", reason: "NODES_UNAVAILABLE" });
    admin("scontrol", "hold", t.handle);
    const held = await waitForObservation(
      backend,
      t,
      (o) => o.kind === "Observed" && o.reason === "HELD",
      30_000,
    );
    expect(held).toMatchObject({
      phase: "QUEUED",
      reason: "HELD",
      message: "waiting: JobHeldAdmin",
    });
    admin("scontrol", "release", t.handle);
    admin("scontrol", "update", "nodename=n1,n2", "state=RESUME");
    await waitForObservation(backend, t, inPhase("RUNNING"), 30_000);
  }, 100_000);

  test("a node set DOWN under a running job ends it NODE_FAILURE (a new attempt may follow)", async () => {
    const t = await submit("cpu", ["/bin/sleep", "600"]);
    await waitForObservation(backend, t, inPhase("RUNNING"), 30_000);
    const node = admin("squeue", "-h", "-j", t.handle, "-o", "%N").trim();
    expect(["n1", "n2"]).toContain(node);
    admin("scontrol", "update", `nodename=${node}`, "state=DOWN", "reason=o4s-test");
    const o = await waitForObservation(backend, t, inPhase("FAILED"), 30_000);
    expect(o).toMatchObject({ phase: "FAILED", reason: "NODE_FAILURE" });
  }, 70_000);
});
