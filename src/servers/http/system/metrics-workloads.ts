/**
 * The workloads' part of /metrics: live ones by kind and phase, ended ones by reason, the
 * latencies a user feels (submit, queue wait, time to READY, exec), and what each owner's
 * live workloads hold, with the owner label bounded.
 */
import type { DaemonMetrics } from "../../../adapters/metrics/daemon-metrics.ts";
import type { OwnerUsageCount, WorkloadCount } from "../../../adapters/store-sqlite/index.ts";
import { isTerminal, PHASES, WORKLOAD_KINDS } from "../../../core/models.ts";
import type { Exposition } from "./exposition.ts";

const LIVE_PHASES = PHASES.filter((p) => !isTerminal(p));

export function workloadSection(
  out: Exposition,
  workloads: readonly WorkloadCount[],
  m: DaemonMetrics,
): void {
  out.family(
    "openai4s_live_workloads",
    "gauge",
    "Workloads not yet ended, by kind and phase (ended ones: openai4s_workload_ends_total).",
  );
  for (const kind of WORKLOAD_KINDS) {
    for (const phase of LIVE_PHASES) {
      const found = workloads.find((w) => w.kind === kind && w.phase === phase);
      out.sample("openai4s_live_workloads", { kind, phase }, found?.count ?? 0);
    }
  }
  out.family(
    "openai4s_workload_ends_total",
    "counter",
    "Workloads that ended since the daemon started, by kind, phase and reason.",
  );
  for (const end of m.ends.entries()) {
    const { kind, phase, reason } = end;
    out.sample("openai4s_workload_ends_total", { kind, phase, reason }, end.value);
  }
  out.family(
    "openai4s_submit_latency_seconds",
    "histogram",
    "A workload's acceptance by the API until the backend answered its first submit.",
  );
  out.histogram("openai4s_submit_latency_seconds", {}, m.submitLatency);
  out.family(
    "openai4s_queue_wait_seconds",
    "histogram",
    "An attempt's QUEUED (accepted by the backend) until RUNNING, by profile.",
  );
  for (const [profile, h] of m.queueWait.entries()) {
    out.histogram("openai4s_queue_wait_seconds", { profile }, h);
  }
  out.family(
    "openai4s_session_time_to_ready_seconds",
    "histogram",
    "A session's creation until it was first READY, by profile.",
  );
  for (const [profile, h] of m.timeToReady.entries()) {
    out.histogram("openai4s_session_time_to_ready_seconds", { profile }, h);
  }
  out.family(
    "openai4s_session_exec_duration_seconds",
    "histogram",
    "One exec, request to outcome (the cell's own run time included).",
  );
  out.histogram("openai4s_session_exec_duration_seconds", {}, m.execDuration);
}

/**
 * How many owners get series of their own. The label's values are bounded twice: they are
 * principal names, which only the admin creates (never a request's text), plus `admin`; and
 * past this many owners with live work, the busiest keep their own series and the rest are
 * summed under `(other)`, so a site with thousands of principals scrapes a fixed size.
 */
export const MAX_OWNER_SERIES = 50;
export const OTHER_OWNERS = "(other)";
const ADMIN_OWNER = "admin";

interface OwnerTotals {
  sessions: number;
  batch: number;
  cpus: number;
  gpus: number;
}

/** Per owner label (capped as MAX_OWNER_SERIES says), what its live workloads hold. */
export function ownerSeries(
  rows: readonly OwnerUsageCount[],
  cap: number = MAX_OWNER_SERIES,
): ReadonlyMap<string, OwnerTotals> {
  const byOwner = new Map<string, OwnerTotals>();
  for (const r of rows) {
    const name = r.owner ?? ADMIN_OWNER;
    const t = byOwner.get(name) ?? { sessions: 0, batch: 0, cpus: 0, gpus: 0 };
    if (r.kind === "SESSION") t.sessions += r.count;
    else t.batch += r.count;
    t.cpus += r.cpus;
    t.gpus += r.gpus;
    byOwner.set(name, t);
  }
  if (byOwner.size <= cap) return byOwner;
  const ranked = [...byOwner].sort(
    ([a, x], [b, y]) => y.sessions + y.batch - (x.sessions + x.batch) || a.localeCompare(b),
  );
  const out = new Map(ranked.slice(0, cap - 1));
  const other: OwnerTotals = { sessions: 0, batch: 0, cpus: 0, gpus: 0 };
  for (const [, t] of ranked.slice(cap - 1)) {
    other.sessions += t.sessions;
    other.batch += t.batch;
    other.cpus += t.cpus;
    other.gpus += t.gpus;
  }
  out.set(OTHER_OWNERS, other);
  return out;
}

export function ownerSection(out: Exposition, rows: readonly OwnerUsageCount[]): void {
  const series = ownerSeries(rows);
  out.family(
    "openai4s_owner_live_workloads",
    "gauge",
    `Workloads not yet ended, by owner (a principal, or admin; past ${MAX_OWNER_SERIES} owners the rest are ${OTHER_OWNERS}) and kind.`,
  );
  for (const [owner, t] of series) {
    out.sample("openai4s_owner_live_workloads", { owner, kind: "SESSION" }, t.sessions);
    out.sample("openai4s_owner_live_workloads", { owner, kind: "BATCH" }, t.batch);
  }
  out.family(
    "openai4s_owner_held_cpus",
    "gauge",
    "CPUs the owner's live workloads may hold at once (what its cpus limit counts).",
  );
  for (const [owner, t] of series) out.sample("openai4s_owner_held_cpus", { owner }, t.cpus);
  out.family(
    "openai4s_owner_held_gpus",
    "gauge",
    "GPUs the owner's live workloads may hold at once (what its gpus limit counts).",
  );
  for (const [owner, t] of series) out.sample("openai4s_owner_held_gpus", { owner }, t.gpus);
}
