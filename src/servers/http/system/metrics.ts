/**
 * Prometheus text exposition (format 0.0.4), checked by `promtool check metrics` in the
 * tests. Series with a fixed label set (every kind x live phase) are always emitted, zero
 * included, so a dashboard's query does not vanish when a phase empties. One function per
 * section: a new figure is a new section (or a line in one), listed in docs/operations.md.
 * The workloads' sections are in metrics-workloads.ts; here, the daemon's own health.
 */
import type { DaemonMetrics } from "../../../adapters/metrics/daemon-metrics.ts";
import type { ProcessFigures } from "../../../adapters/metrics/process-figures.ts";
import type { OwnerUsageCount, WorkloadCount } from "../../../adapters/store-sqlite/index.ts";
import type { OrphanDiagnostics } from "../../../core/ports/allocation-backend.ts";
import type { SpoolSpaceReport, TickFigures } from "../deps.ts";
import { Exposition, type RequestCounter } from "./exposition.ts";
import { ownerSection, workloadSection } from "./metrics-workloads.ts";

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export interface MetricsInput {
  readonly version: string;
  /** Now, epoch ms (the backup age). */
  readonly now: number;
  readonly workloads: readonly WorkloadCount[];
  /** Live workloads by owner and kind (absent: the section is left out). */
  readonly owners?: readonly OwnerUsageCount[];
  readonly lastTick: TickFigures | null;
  readonly requests: RequestCounter;
  readonly metrics: DaemonMetrics;
  /** The SESSION isolation verdict (ports.ts sessionIsolationVerdict) is Verified now. */
  readonly isolationVerified: boolean;
  /** Absent: the process section is left out (tests that build an app in-process). */
  readonly process?: ProcessFigures;
  readonly backend: {
    readonly degraded: boolean;
    /** Port calls, from the reconciler. */
    readonly calls: {
      readonly perSecond: number;
      readonly totals: Readonly<Record<string, number>>;
    };
    /** The backend's own commands since start (its diagnostics' `calls`). */
    readonly commands: Readonly<Record<string, number>>;
  };
  /** From the backend's diagnostics when it sweeps for orphans; undefined when it does not. */
  readonly orphans?: OrphanDiagnostics | null;
  readonly isolation: {
    readonly launchesSandboxed: boolean;
    readonly unsandboxedBatchAllowed: boolean;
    readonly batchRefusal: string | null;
  };
  /** The spool's room, when the daemon watches it. */
  readonly spool?: SpoolSpaceReport;
  /** The state dir's room, when the daemon watches it. */
  readonly stateDir?: SpoolSpaceReport;
  /** Every profile, with its breaker (degraded: the backend keeps refusing it). */
  readonly profiles?: readonly {
    readonly name: string;
    readonly degraded: boolean;
    readonly consecutiveRejections: number;
    /** The scheduler's last dry run refused it (a placement the cluster lacks). */
    readonly schedulerRefuses: boolean;
  }[];
}

function orphanSection(out: Exposition, orphans: OrphanDiagnostics | null): void {
  out.family(
    "openai4s_orphan_jobs",
    "gauge",
    "Jobs at the backend carrying this daemon's identity with no allocation row (last sweep).",
  );
  out.sample("openai4s_orphan_jobs", {}, orphans?.jobs.length ?? 0);
  out.family(
    "openai4s_orphan_sweep_timestamp_seconds",
    "gauge",
    "When the last answered orphan sweep ran (0: none yet).",
  );
  const at = orphans?.lastSweepAt ?? null;
  out.sample("openai4s_orphan_sweep_timestamp_seconds", {}, at === null ? 0 : at / 1000);
}

function tickSection(out: Exposition, input: MetricsInput): void {
  const tick = input.lastTick;
  out.family(
    "openai4s_reconciler_last_tick_timestamp_seconds",
    "gauge",
    "When the last completed reconciler tick started (0: none yet).",
  );
  out.sample(
    "openai4s_reconciler_last_tick_timestamp_seconds",
    {},
    tick ? tick.startedAt / 1000 : 0,
  );
  out.family(
    "openai4s_reconciler_last_tick_duration_seconds",
    "gauge",
    "Duration of the last completed reconciler tick.",
  );
  out.sample(
    "openai4s_reconciler_last_tick_duration_seconds",
    {},
    tick ? tick.durationMs / 1000 : 0,
  );
  out.family(
    "openai4s_reconciler_tick_duration_seconds",
    "histogram",
    "Duration of every full reconciler tick since the daemon started.",
  );
  out.histogram("openai4s_reconciler_tick_duration_seconds", {}, input.metrics.tickDuration);
  out.family(
    "openai4s_reconciler_last_tick_backend_calls",
    "gauge",
    "Calls to the backend made by the last completed reconciler tick, by port operation.",
  );
  for (const [operation, calls] of Object.entries(tick?.backendCalls ?? {})) {
    out.sample("openai4s_reconciler_last_tick_backend_calls", { operation }, calls);
  }
  out.family(
    "openai4s_reconciler_last_tick_backend_unavailable",
    "gauge",
    "1 when the backend did not answer during the last completed tick.",
  );
  out.sample(
    "openai4s_reconciler_last_tick_backend_unavailable",
    {},
    tick?.backendUnavailable ? 1 : 0,
  );
}

function backendSection(out: Exposition, backend: MetricsInput["backend"]): void {
  out.family(
    "openai4s_backend_degraded",
    "gauge",
    "1 while a backend call is slow or the last one got no answer.",
  );
  out.sample("openai4s_backend_degraded", {}, backend.degraded ? 1 : 0);
  out.family(
    "openai4s_backend_calls_per_second",
    "gauge",
    "Backend calls started per second over the last minute.",
  );
  out.sample("openai4s_backend_calls_per_second", {}, backend.calls.perSecond);
  out.family("openai4s_backend_calls_total", "counter", "Backend calls by port operation.");
  for (const [operation, calls] of Object.entries(backend.calls.totals)) {
    out.sample("openai4s_backend_calls_total", { operation }, calls);
  }
  out.family("openai4s_backend_commands_total", "counter", "The backend's own commands, by name.");
  for (const [command, calls] of Object.entries(backend.commands)) {
    out.sample("openai4s_backend_commands_total", { command }, calls);
  }
}

function httpSection(out: Exposition, input: MetricsInput): void {
  out.family("openai4s_http_requests_total", "counter", "API requests served.");
  for (const { labels, value } of input.requests.snapshot().values()) {
    out.sample("openai4s_http_requests_total", labels, value);
  }
  out.family(
    "openai4s_http_request_duration_seconds",
    "histogram",
    "API requests until the response's head, by method and route pattern.",
  );
  for (const [key, h] of input.metrics.httpDuration.entries()) {
    const [method = "", route = ""] = key.split("\u0000");
    out.histogram("openai4s_http_request_duration_seconds", { method, route }, h);
  }
}

function gatewaySection(out: Exposition, input: MetricsInput): void {
  const g = input.metrics.gateway;
  out.family(
    "openai4s_gateway_connections_total",
    "counter",
    "Session workers admitted by the worker gateway.",
  );
  out.sample("openai4s_gateway_connections_total", {}, g.connections);
  out.family(
    "openai4s_gateway_disconnections_total",
    "counter",
    "Session workers that went away from the worker gateway.",
  );
  out.sample("openai4s_gateway_disconnections_total", {}, g.disconnections);
  out.family("openai4s_gateway_connected_workers", "gauge", "Session workers connected now.");
  out.sample("openai4s_gateway_connected_workers", {}, g.connections - g.disconnections);
  out.family(
    "openai4s_gateway_refusals_total",
    "counter",
    "Peers refused at the worker gateway's handshake (bad, expired, replayed credential...).",
  );
  out.sample("openai4s_gateway_refusals_total", {}, g.refusals);
}

function processSection(out: Exposition, p: ProcessFigures): void {
  out.family("process_cpu_seconds_total", "counter", "User and system CPU time spent.");
  out.sample("process_cpu_seconds_total", {}, p.cpuSeconds);
  out.family("process_resident_memory_bytes", "gauge", "Resident memory size.");
  out.sample("process_resident_memory_bytes", {}, p.residentBytes);
  out.family("process_start_time_seconds", "gauge", "When the process started (Unix time).");
  out.sample("process_start_time_seconds", {}, p.startTimeSeconds);
  if (p.openFds !== null) {
    out.family("process_open_fds", "gauge", "Open file descriptors.");
    out.sample("process_open_fds", {}, p.openFds);
  }
  if (p.maxFds !== null) {
    out.family("process_max_fds", "gauge", "The open file descriptor limit.");
    out.sample("process_max_fds", {}, p.maxFds);
  }
}

/** How jobs are isolated: an opt-out such as --allow-unsandboxed-batch must show wherever one looks. */
function isolationSection(out: Exposition, input: MetricsInput): void {
  out.family(
    "openai4s_session_isolation_verified",
    "gauge",
    "1 while the per-allocation sandbox sessions need is verified (0: SESSIONs are refused).",
  );
  out.sample("openai4s_session_isolation_verified", {}, input.isolationVerified ? 1 : 0);
  out.family(
    "openai4s_launches_sandboxed",
    "gauge",
    "1 while new jobs start inside the verified per-allocation sandbox.",
  );
  out.sample("openai4s_launches_sandboxed", {}, input.isolation.launchesSandboxed ? 1 : 0);
  out.family(
    "openai4s_unsandboxed_batch_allowed",
    "gauge",
    "1 when started with --allow-unsandboxed-batch (BATCH may run as the daemon's uid unsandboxed).",
  );
  out.sample(
    "openai4s_unsandboxed_batch_allowed",
    {},
    input.isolation.unsandboxedBatchAllowed ? 1 : 0,
  );
  out.family(
    "openai4s_batch_refused",
    "gauge",
    "1 while BATCH submissions are refused with ISOLATION_UNAVAILABLE.",
  );
  out.sample("openai4s_batch_refused", {}, input.isolation.batchRefusal === null ? 0 : 1);
}

function spoolSection(out: Exposition, spool: SpoolSpaceReport): void {
  out.family(
    "openai4s_spool_free_bytes",
    "gauge",
    "Bytes an unprivileged writer may still use in the spool (-1 when unread).",
  );
  out.sample("openai4s_spool_free_bytes", {}, spool.freeBytes ?? -1);
  out.family(
    "openai4s_spool_low",
    "gauge",
    "1 while the spool is below its low-water mark: new submissions get 503 SPOOL_FULL.",
  );
  out.sample("openai4s_spool_low", {}, spool.low ? 1 : 0);
}

function stateDirSection(out: Exposition, state: SpoolSpaceReport): void {
  out.family(
    "openai4s_state_dir_free_bytes",
    "gauge",
    "Bytes still free in the state dir's filesystem (-1 when unread).",
  );
  out.sample("openai4s_state_dir_free_bytes", {}, state.freeBytes ?? -1);
  out.family(
    "openai4s_state_dir_low_water_bytes",
    "gauge",
    "The state dir's low-water mark (-1 when unread).",
  );
  out.sample("openai4s_state_dir_low_water_bytes", {}, state.lowWaterBytes ?? -1);
  out.family(
    "openai4s_state_dir_low",
    "gauge",
    "1 while the state dir is below its low-water mark: new submissions get 503 STATE_DIR_FULL.",
  );
  out.sample("openai4s_state_dir_low", {}, state.low ? 1 : 0);
}

/** Each profile's breaker: bounded by the admin's profile list, never by user input. */
function profileSection(out: Exposition, profiles: NonNullable<MetricsInput["profiles"]>): void {
  type Profile = (typeof profiles)[number];
  const gauges: readonly (readonly [string, string, (p: Profile) => number])[] = [
    [
      "openai4s_profile_degraded",
      "1 while the backend keeps refusing this profile's submissions (its breaker is open).",
      (p) => (p.degraded ? 1 : 0),
    ],
    [
      "openai4s_profile_consecutive_rejections",
      "Submissions of this profile the backend refused in a row (0 after one succeeds).",
      (p) => p.consecutiveRejections,
    ],
    [
      "openai4s_profile_scheduler_refuses",
      "1 while the scheduler's dry run of this profile refuses any job of it (checked at start and every 10 minutes; 0 once one of its jobs is accepted).",
      (p) => (p.schedulerRefuses ? 1 : 0),
    ],
  ];
  for (const [name, help, value] of gauges) {
    out.family(name, "gauge", help);
    for (const p of profiles) out.sample(name, { profile: p.name }, value(p));
  }
}

function backupSection(out: Exposition, input: MetricsInput): void {
  const at = input.metrics.lastBackupAt;
  // No sample before the first backup: 0 would read as "just backed up"; absent() alerts.
  if (at === null) return;
  out.family(
    "openai4s_backup_age_seconds",
    "gauge",
    "Seconds since the last backup this daemon streamed out whole.",
  );
  out.sample("openai4s_backup_age_seconds", {}, Math.max(0, (input.now - at) / 1000));
}

export function renderMetrics(input: MetricsInput): string {
  const out = new Exposition();
  out.family("openai4s_build_info", "gauge", "Version of the running daemon.");
  out.sample("openai4s_build_info", { version: input.version }, 1);
  workloadSection(out, input.workloads, input.metrics);
  if (input.owners !== undefined) ownerSection(out, input.owners);
  if (input.orphans !== undefined) orphanSection(out, input.orphans);
  tickSection(out, input);
  backendSection(out, input.backend);
  isolationSection(out, input);
  if (input.spool !== undefined) spoolSection(out, input.spool);
  if (input.stateDir !== undefined) stateDirSection(out, input.stateDir);
  if (input.profiles !== undefined) profileSection(out, input.profiles);
  httpSection(out, input);
  gatewaySection(out, input);
  backupSection(out, input);
  if (input.process !== undefined) processSection(out, input.process);
  return `${out.lines.join("\n")}\n`;
}
