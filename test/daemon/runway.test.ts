/**
 * Runway on the local backend through the whole daemon: a job with a time limit shows its
 * deadline and TIME_REMAINING, gets one TIME_LIMIT_NEAR event before its limit (the default
 * lead, capped at half its time), and then ends TIME_LIMIT_EXCEEDED at that deadline.
 * OPENAI4S_WARN_MINUTES_BEFORE_LIMIT=0 turns the warning off; a value that is not whole
 * minutes is a configuration error. Polled with deadlines, never timed.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { WARN_MINUTES_ENV } from "../../src/adapters/backend-local/settings.ts";
import {
  type DaemonConfig,
  type RunningDaemon,
  startDaemon,
} from "../../src/apps/daemon/daemon.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { localProfilesFromEnv } from "../support/local-profiles.ts";
import { tempDirs } from "../support/temp-dir.ts";

const daemons: RunningDaemon[] = [];
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
});
// Registered after the hook that stops the daemons: their dirs go once nothing writes there.
const makeDir = tempDirs("o4s-daemon-runway-", "each");

function config(env: Record<string, string> = {}): DaemonConfig {
  return localDaemonConfig(join(makeDir(), "state"), {
    env: { PATH: process.env["PATH"], ...env },
  });
}

async function started(c: DaemonConfig): Promise<RunningDaemon> {
  const daemon = await startedDaemon(c);
  daemons.push(daemon);
  return daemon;
}

interface Event {
  readonly at: string;
  readonly phase: string;
  readonly reason: string | null;
}

async function runToLimit(d: RunningDaemon) {
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://localhost${path}`, {
      unix: d.layout.apiSocket,
      method,
      ...(body === undefined
        ? {}
        : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    } as never);
    return (await res.json()) as Record<string, unknown>;
  };
  const created = await api("POST", "/v1/workloads", {
    kind: "BATCH",
    profile: "default",
    command: ["sleep", "60"],
    timeLimitSeconds: 8,
  });
  const id = String(created["id"]);
  let running: Record<string, unknown> | null = null;
  const end = Date.now() + 40_000;
  for (;;) {
    const w = await api("GET", `/v1/workloads/${id}`);
    if (w["phase"] === "RUNNING" && w["deadline"] !== null) running ??= w;
    if (w["phase"] === "FAILED" || w["phase"] === "COMPLETED") break;
    if (Date.now() > end) throw new Error(`still ${String(w["phase"])}`);
    await Bun.sleep(100);
  }
  const ended = await api("GET", `/v1/workloads/${id}`);
  const events = (await api("GET", `/v1/workloads/${id}/events`)) as unknown as Event[];
  return { running, ended, events };
}

describe("runway on the local backend", () => {
  test("deadline, TIME_REMAINING, one TIME_LIMIT_NEAR before the limit, then the limit", async () => {
    const d = await started(config());
    const { running, ended, events } = await runToLimit(d);
    if (running === null) throw new Error("never seen running with a deadline");
    expect(running["timeRemainingSeconds"] as number).toBeGreaterThanOrEqual(0);
    expect(running["timeRemainingSeconds"] as number).toBeLessThanOrEqual(8);
    expect(ended).toMatchObject({
      phase: "FAILED",
      reason: "TIME_LIMIT_EXCEEDED",
      deadline: null,
      timeRemainingSeconds: null,
    });
    const deadlineMs = Date.parse(String(running["deadline"]));
    const warnings = events.filter((e) => e.reason === "TIME_LIMIT_NEAR");
    expect(warnings).toHaveLength(1);
    // The default lead (5 min) capped at half the 8 s: written in the last 4 s before the end.
    const warnedAt = Date.parse(warnings[0]?.at ?? "");
    expect(warnedAt).toBeGreaterThanOrEqual(deadlineMs - 4_000);
    expect(warnedAt).toBeLessThan(deadlineMs);
    const story = events.map((e) => e.reason);
    expect(story.indexOf("TIME_LIMIT_NEAR")).toBeLessThan(story.indexOf("TIME_LIMIT_EXCEEDED"));
  }, 60_000);

  test(`${WARN_MINUTES_ENV}=0 turns the warning off`, async () => {
    const d = await started(config({ [WARN_MINUTES_ENV]: "0" }));
    const { ended, events } = await runToLimit(d);
    expect(ended["reason"]).toBe("TIME_LIMIT_EXCEEDED");
    expect(events.filter((e) => e.reason === "TIME_LIMIT_NEAR")).toHaveLength(0);
  }, 60_000);

  test("a value that is not whole minutes is refused at start, naming the variable", async () => {
    for (const bad of ["5m", "1.5", "-1", "2000"]) {
      const result = await startDaemon({
        ...config({ [WARN_MINUTES_ENV]: bad }),
        log: memoryLog(),
      });
      expect(result.kind).toBe("ConfigError");
      expect(result.kind === "ConfigError" && result.message).toContain(WARN_MINUTES_ENV);
    }
    const ok = localProfilesFromEnv({ [WARN_MINUTES_ENV]: "10" });
    expect(ok.kind === "Valid" && ok.profiles.map((p) => p.warnBeforeLimitSeconds)).toEqual([600]);
  });
});
