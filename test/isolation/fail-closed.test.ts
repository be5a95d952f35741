/**
 * BATCH fails closed through the built binary (issue 18: an unprivileged daemon on a host
 * where bubblewrap cannot run started with one warning line, then ran BATCH jobs as its own
 * uid, and a job read `admin-token`). The daemon runs as an unprivileged uid with bwrap
 * pointed at a missing path: BATCH is refused with ISOLATION_UNAVAILABLE and nothing is
 * written; restarted with --allow-unsandboxed-batch it runs, and says so at start, in the
 * diagnostics and in /metrics.
 */
import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";

const IS_ROOT = process.getuid?.() === 0;
const DAEMON_UID = 4243;
const NO_BWRAP = { PATH: "/usr/local/bin:/usr/bin:/bin", OPENAI4S_BWRAP: "/nonexistent/bwrap" };

async function request(d: Daemon, path: string, body?: unknown) {
  const response = await fetch(`http://localhost${path}`, {
    unix: d.socket,
    ...(body === undefined
      ? {}
      : {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
  });
  return { status: response.status, text: await response.text() };
}

const BATCH = { kind: "BATCH", profile: "default", command: ["sh", "-c", "id -u"] };

describe.if(IS_ROOT)("an unprivileged daemon without a sandbox", () => {
  let d: Daemon | null = null;

  beforeAll(() => ensureBuilt(), 120_000);
  afterEach(async () => {
    await d?.stop();
    d = null;
  });

  test("refuses BATCH before anything is written, and says why everywhere", async () => {
    d = await startDaemon({ env: NO_BWRAP, daemonUid: DAEMON_UID, gateway: false });
    const refused = await request(d, "/v1/workloads", BATCH);
    expect(refused.status).toBe(409);
    expect(refused.text).toContain("ISOLATION_UNAVAILABLE");
    expect(refused.text).toContain("--allow-unsandboxed-batch");
    expect(JSON.parse((await request(d, "/v1/workloads")).text).items).toEqual([]);
    const workloads = join(`${d.stateDir}-spool`, "workloads");
    expect(existsSync(workloads) ? readdirSync(workloads) : []).toEqual([]);
    const diagnostics = JSON.parse((await request(d, "/v1/diagnostics")).text);
    expect(diagnostics.isolation).toMatchObject({
      launchesSandboxed: false,
      unsandboxedBatchAllowed: false,
    });
    expect(diagnostics.isolation.batchRefusal).toContain("--allow-unsandboxed-batch");
    const profiles = JSON.parse((await request(d, "/v1/profiles")).text).profiles;
    expect(profiles[0].placement.BATCH).toMatchObject({
      placeable: false,
      reason: "ISOLATION_UNAVAILABLE",
    });
    const metrics = (await request(d, "/metrics")).text;
    expect(metrics).toContain("openai4s_batch_refused 1");
    expect(metrics).toContain("openai4s_unsandboxed_batch_allowed 0");
  }, 60_000);

  test("with --allow-unsandboxed-batch runs BATCH as its uid, and says so", async () => {
    d = await startDaemon({
      env: NO_BWRAP,
      daemonUid: DAEMON_UID,
      gateway: false,
      args: ["--allow-unsandboxed-batch"],
    });
    expect(d.log()).toContain("started with --allow-unsandboxed-batch");
    const submitted = await request(d, "/v1/workloads", BATCH);
    expect(submitted.status).toBe(201);
    const id = JSON.parse(submitted.text).id as string;
    expect((await d.cli("wait", id, "--timeout", "30s")).code).toBe(0);
    expect((await d.cli("logs", id)).stdout).toBe(`${DAEMON_UID}\n`);
    const diagnostics = JSON.parse((await request(d, "/v1/diagnostics")).text);
    expect(diagnostics.isolation).toMatchObject({
      unsandboxedBatchAllowed: true,
      batchRefusal: null,
    });
    const metrics = (await request(d, "/metrics")).text;
    expect(metrics).toContain("openai4s_unsandboxed_batch_allowed 1");
    expect(metrics).toContain("openai4s_batch_refused 0");
  }, 60_000);
});
