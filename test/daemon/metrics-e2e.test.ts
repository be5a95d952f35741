/**
 * `/metrics` of a real daemon (the built binary, local backend, bubblewrap, worker gateway
 * on) after real work: a session that became READY and ran an exec, a batch job that
 * exited 0, one that exited 1, one cancelled, and a backup. Its text passes `promtool check
 * metrics`, and the figures an operator alerts on are there with the values the work implies.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { checkMetrics, PROMTOOL, skipLine } from "../support/promtool.ts";

const TEST_TIMEOUT_MS = 90_000;

async function scrape(d: Daemon): Promise<string> {
  const res = await fetch("http://localhost/metrics", { unix: d.socket });
  expect(res.status).toBe(200);
  return res.text();
}

/** The value of one sample line (exact name and labels), or null when absent. */
function value(text: string, series: string): number | null {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

async function submit(d: Daemon, ...command: string[]): Promise<string> {
  const r = await d.cli("submit", "--", ...command);
  if (r.code !== 0) throw new Error(`submit failed (${r.code}): ${r.stderr}\n${d.log()}`);
  const id = r.stdout.trim().split(/\s+/).at(-1);
  if (!id) throw new Error(`no id in ${JSON.stringify(r.stdout)}`);
  return id;
}

async function waitEnded(d: Daemon, id: string): Promise<void> {
  await eventually(
    async () =>
      ["COMPLETED", "FAILED", "CANCELLED", "LOST"].includes((await d.show(id)).phase) ? true : null,
    { what: `${id} ended`, timeoutMs: 30_000, intervalMs: 100 },
  );
}

/** The gateway's address, from the daemon's own log line. */
function gatewayAddress(d: Daemon): { hostname: string; port: number } {
  for (const line of d.log().split("\n")) {
    if (!line.includes("worker gateway: listening")) continue;
    const address = String((JSON.parse(line) as { address: string }).address);
    const cut = address.lastIndexOf(":");
    return { hostname: address.slice(0, cut), port: Number(address.slice(cut + 1)) };
  }
  throw new Error(`no gateway address in the log:\n${d.log()}`);
}

/** A stranger at the gateway: TLS, then a frame that is no credential; waits for the close. */
async function strangerAtGateway(d: Daemon): Promise<void> {
  // A whole frame (4-byte big-endian length, then the payload) that is not JSON: malformed.
  // Written once the TLS session is open: a write before that is lost.
  const frame = new Uint8Array([0, 0, 0, 4, ...new TextEncoder().encode("nope")]);
  const ended = await new Promise<string>((resolve) => {
    Bun.connect({
      ...gatewayAddress(d),
      tls: { rejectUnauthorized: false },
      socket: {
        open: (socket) => void socket.write(frame),
        data() {},
        close: () => resolve("closed"),
        end: () => resolve("ended"),
        error: (_socket, error) => resolve(`error: ${String(error)}`),
        connectError: (_socket, error) => resolve(`connect error: ${String(error)}`),
      },
    });
  });
  expect(ended).toMatch(/^(closed|ended)$/);
}

describe("/metrics of a real daemon with jobs", () => {
  let d: Daemon;

  beforeAll(async () => {
    ensureBuilt();
    d = await startDaemon({});
  }, 120_000);

  afterAll(async () => {
    await d?.stop();
  });

  test(
    "promtool-clean, with ends by reason, queue wait, time to READY, exec, backup age, process",
    async () => {
      const session = await d.cli("session", "start");
      expect(session.code).toBe(0);
      const sessionId = session.stdout.trim().split(/\s+/).at(-1) as string;
      const ready = await d.cli("wait", sessionId, "--until", "READY", "--timeout", "40s");
      if (ready.code !== 0)
        throw new Error(`not READY: ${ready.stdout}${ready.stderr}\n${d.log()}`);
      expect((await d.cli("exec", sessionId, "1+1")).code).toBe(0);

      const ok = await submit(d, "true");
      const failed = await submit(d, "sh", "-c", "exit 1");
      const slow = await submit(d, "sleep", "60");
      await waitEnded(d, ok);
      await waitEnded(d, failed);
      expect((await d.cli("cancel", slow)).code).toBe(0);
      await waitEnded(d, slow);
      expect((await d.cli("backup", join(d.dir, "copy.db"))).code).toBe(0);
      await strangerAtGateway(d);

      const text = await scrape(d);
      if (PROMTOOL === null) skipLine("promtool check metrics (real daemon)");
      else {
        const checked = await checkMetrics(text);
        expect(checked.output).toBe("");
        expect(checked.code).toBe(0);
      }
      const ends = 'openai4s_workload_ends_total{kind="BATCH",phase=';
      expect(value(text, `${ends}"COMPLETED",reason="EXITED_ZERO"}`)).toBe(1);
      expect(value(text, `${ends}"FAILED",reason="NONZERO_EXIT"}`)).toBe(1);
      expect(value(text, `${ends}"CANCELLED",reason="USER_CANCELLED"}`)).toBe(1);
      // Live workloads only: the session still runs, the three batch jobs ended.
      expect(value(text, 'openai4s_live_workloads{kind="BATCH",phase="RUNNING"}')).toBe(0);
      expect(value(text, 'openai4s_live_workloads{kind="SESSION",phase="RUNNING"}')).toBe(1);
      expect(value(text, "openai4s_submit_latency_seconds_count")).toBe(4);
      expect(value(text, 'openai4s_queue_wait_seconds_count{profile="default"}')).toBe(4);
      expect(value(text, 'openai4s_session_time_to_ready_seconds_count{profile="default"}')).toBe(
        1,
      );
      expect(value(text, "openai4s_session_exec_duration_seconds_count")).toBe(1);
      expect(value(text, "openai4s_gateway_connections_total")).toBeGreaterThanOrEqual(1);
      expect(value(text, "openai4s_gateway_refusals_total")).toBe(1);
      expect(value(text, "openai4s_session_isolation_verified")).toBe(1);
      expect(value(text, "openai4s_reconciler_tick_duration_seconds_count")).toBeGreaterThan(0);
      expect(value(text, "openai4s_backup_age_seconds")).toBeGreaterThanOrEqual(0);
      expect(value(text, "process_open_fds")).toBeGreaterThan(0);
      expect(value(text, "process_resident_memory_bytes")).toBeGreaterThan(0);
      expect(value(text, "process_cpu_seconds_total")).toBeGreaterThan(0);
      expect(
        value(
          text,
          'openai4s_http_request_duration_seconds_count{method="POST",route="/v1/workloads/:id/exec"}',
        ),
      ).toBe(1);
      await d.cli("cancel", sessionId);
    },
    TEST_TIMEOUT_MS,
  );
});
