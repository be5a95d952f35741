/**
 * A SESSION preempted on the REAL Slurm test cluster (scripts/slurm-test-cluster.sh configures
 * PreemptMode=REQUEUE and a higher-tier partition "urgent"; our jobs are submitted
 * --no-requeue, so a preempted job ends PREEMPTED). Through the built binary with the worker
 * gateway on and every launch inside bubblewrap on the nodes.
 *
 *  - The session is READY in epoch 1 and shows TIME_REMAINING (its profile has a limit).
 *  - An administrator's urgent job takes every node: the session's job is preempted, and
 *    because attempts remain the daemon starts epoch 2 (a new job, a new credential), which
 *    becomes READY with a fresh kernel.
 *  - Epoch 1's credential, kept by its worker (the wrapper below copies it into the
 *    workspace, the one place a sandboxed worker may write), is refused by the gateway when
 *    presented after the epoch moved: a worker of the old epoch cannot rejoin.
 *  - The events tell the whole story.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BINARY,
  condition,
  type Daemon,
  ensureBuilt,
  startDaemon,
  type WorkloadView,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import {
  adminCommand,
  preemptEveryNode,
  type TestCluster,
  testCluster,
} from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CLUSTER_TOML = `[profiles.single]
description = "One node for a session"
partition = "debug"
nodes = 1
cpus = 1
time_limit_minutes = 10
allow_sessions = true
`;

/** Where each worker leaves a copy of its credential directory (in its workspace). */
const STASH = "kept-credential";

interface Refusal {
  readonly message: string;
  readonly allocationId?: string;
  readonly epoch?: number;
  readonly rank?: number;
  readonly reason?: string;
}

interface Event {
  readonly phase: string;
  readonly reason: string | null;
  readonly message: string | null;
}

describe.skipIf(testCluster === null)("slurm-cluster session preemption", () => {
  const cluster = testCluster as TestCluster;
  let d: Daemon;
  let scratch: string;
  const adminJobs: string[] = [];

  const admin = (...args: string[]) => adminCommand(cluster, ...args).trim();

  async function api(method: string, path: string, body?: unknown): Promise<Response> {
    return fetch(`http://localhost${path}`, {
      method,
      unix: d.socket,
      headers: { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }

  type View = Omit<WorkloadView, "allocations"> & {
    readonly executionEpoch: number;
    readonly timeRemainingSeconds: number | null;
    readonly allocations: readonly {
      readonly id: string;
      readonly epoch: number;
      readonly phase: string;
      readonly reason: string | null;
      readonly startedAt: string | number | null;
    }[];
  };
  const view = async (id: string) =>
    (await (await api("GET", `/v1/workloads/${id}`)).json()) as View;

  const run = async (id: string, code: string) =>
    (await (await api("POST", `/v1/workloads/${id}/exec`, { code })).json()) as {
      status: string;
      output: string;
      error: { ename: string } | string | null;
    };

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-slurm-session-preempt-");
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, CLUSTER_TOML);
    // The worker as the backend starts it, after keeping a copy of its credential directory
    // in its workspace (its working directory): what a worker of an old epoch still holds.
    const wrapperDir = join(scratch, "worker-wrapper");
    mkdirSync(wrapperDir, { recursive: true });
    const wrapper = join(wrapperDir, "keep-credential-then-worker.sh");
    writeFileSync(
      wrapper,
      [
        "#!/bin/sh",
        'dir=""; prev=""',
        'for a in "$@"; do [ "$prev" = "--credential-dir" ] && dir="$a"; prev="$a"; done',
        `if [ -n "$dir" ] && [ ! -e ${STASH} ]; then mkdir ${STASH} && cp "$dir"/* ${STASH}/; fi`,
        `exec "${BINARY}" worker "$@"`,
        "",
      ].join("\n"),
    );
    chmodSync(wrapper, 0o755);
    d = await startDaemon({
      args: ["--backend", "slurm", "--cluster-config", config],
      env: {
        SLURM_CONF: cluster.slurmConf,
        PATH: `${process.env["PATH"] ?? "/usr/bin:/bin"}:/usr/sbin:/sbin`,
        OPENAI4S_WORKER_COMMAND: JSON.stringify([wrapper]),
      },
      startTimeoutMs: 120_000,
    });
    await eventually(() => d.log().includes("session isolation verified on the nodes"), {
      what: "session isolation verified on the nodes",
      timeoutMs: 120_000,
    });
  }, 240_000);

  afterAll(async () => {
    if (adminJobs.length > 0) admin("scancel", ...adminJobs);
    if (!d) return;
    await d.stop();
    removeDir(scratch);
  }, 60_000);

  test("a preempted session becomes epoch 2 and READY again; epoch 1's credential is refused", async () => {
    const created = await api("POST", "/v1/workloads", {
      kind: "SESSION",
      profile: "single",
      maxAttempts: 2,
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const ready = (epoch: number) =>
      eventually(
        async () => {
          const w = await view(id);
          return w.executionEpoch === epoch && condition(w, "READY")?.status === "TRUE" ? w : null;
        },
        { what: `READY in epoch ${epoch}`, timeoutMs: 120_000, intervalMs: 200 },
      );

    const first = await ready(1);
    // TIME_REMAINING from the scheduler's end time: at most the profile's ten minutes.
    expect(first.timeRemainingSeconds).not.toBeNull();
    expect(first.timeRemainingSeconds as number).toBeGreaterThan(0);
    expect(first.timeRemainingSeconds as number).toBeLessThanOrEqual(600);
    expect(await run(id, "x = 41")).toMatchObject({ status: "OK" });
    const epoch1 = first.allocations.find((a) => a.epoch === 1);
    if (!epoch1) throw new Error("no epoch 1 allocation");
    // The credential epoch 1's worker kept (the copy is made before the worker starts).
    const kept = await eventually(
      () => {
        const found = Bun.spawnSync(["find", `${d.stateDir}-spool`, "-type", "d", "-name", STASH]);
        const path = found.stdout.toString().trim().split("\n")[0];
        return path !== undefined && path !== "" ? path : null;
      },
      { what: "epoch 1's kept credential" },
    );
    const stolen = join(scratch, "epoch-1-credential");
    Bun.spawnSync(["cp", "-r", kept, stolen]);

    // An administrator's urgent job needs every node: the session's job is preempted.
    const urgent = preemptEveryNode(cluster);
    expect(urgent).toMatch(/^[0-9]+$/);
    adminJobs.push(urgent);

    const second = await ready(2);
    expect(second.allocations.map((a) => [a.epoch, a.phase, a.reason])).toEqual([
      [1, "FAILED", "PREEMPTED"],
      [2, "RUNNING", null],
    ]);
    // A new attempt is a new kernel: epoch 1's variables are gone, the session works.
    expect(await run(id, "x")).toMatchObject({ status: "ERROR" });
    expect(await run(id, "y = 1 + 1; y")).toMatchObject({ status: "OK", output: "2" });

    // Epoch 1's worker comes back with what it kept: the gateway refuses it.
    const replay = Bun.spawn([BINARY, "worker", "--credential-dir", stolen, "--rank-env", "R"], {
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", R: "0" },
      stdout: "ignore",
      stderr: "pipe",
    });
    const killer = setTimeout(() => replay.kill("SIGKILL"), 30_000);
    const code = await replay.exited;
    clearTimeout(killer);
    // Exit 1: refused (never 0, which would mean it served as a worker).
    expect(code).toBe(1);
    const refusal = await eventually(
      () =>
        d
          .log()
          .split("\n")
          .filter((l) => l.includes("credential refused"))
          .map((l) => JSON.parse(l) as Refusal)
          .find((r) => r.allocationId === epoch1.id) ?? null,
      { what: "the gateway to refuse epoch 1's credential", timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(refusal).toMatchObject({ epoch: 1, rank: 0 });
    expect(["unknown allocation", "fenced", "wrong epoch"]).toContain(refusal.reason ?? "");
    // Epoch 2 is untouched by the attempt.
    expect(condition(await view(id), "READY")?.status).toBe("TRUE");

    // The whole story: running in epoch 1, preempted, the retry, running again in epoch 2.
    const events = (await (await api("GET", `/v1/workloads/${id}/events`)).json()) as Event[];
    const retry = events.findIndex((e) => e.reason === "RETRYING");
    expect(events[retry]?.message).toBe("attempt 1 ended PREEMPTED; attempt 2 of 2 follows");
    const runningAt = events.flatMap((e, i) => (e.phase === "RUNNING" ? [i] : []));
    expect(runningAt.some((i) => i < retry)).toBe(true);
    expect(runningAt.some((i) => i > retry)).toBe(true);
    // The refused latecomer changed nothing: no event after epoch 2 started running.
    expect(events.slice(runningAt.at(-1) ?? 0).every((e) => e.phase === "RUNNING")).toBe(true);
    await api("POST", `/v1/workloads/${id}/cancel`);
  }, 360_000);
});
