/**
 * Prometheus text exposition (format 0.0.4). Series with a fixed label set (every kind x
 * phase) are always emitted, zero included, so a dashboard's query does not vanish when a
 * phase empties.
 */
import { PHASES, WORKLOAD_KINDS } from "../../orchestration/models.ts";
import type { OrphanDiagnostics } from "../../orchestration/ports.ts";
import type { WorkloadCount } from "../../store/index.ts";
import type { SpoolSpaceReport, TickFigures } from "../deps.ts";

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Requests served, by method, route pattern and status; owned by one app instance. */
export interface RequestCounter {
  count(method: string, route: string, status: number): void;
  snapshot(): ReadonlyMap<string, { readonly labels: Labels; readonly value: number }>;
}

type Labels = Readonly<Record<string, string>>;

export function createRequestCounter(): RequestCounter {
  const series = new Map<string, { labels: Labels; value: number }>();
  return {
    count(method, route, status) {
      const labels = { method, route, status: String(status) };
      const key = JSON.stringify(labels);
      const entry = series.get(key);
      if (entry) entry.value += 1;
      else series.set(key, { labels, value: 1 });
    },
    snapshot: () => series,
  };
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function sample(name: string, labels: Labels, value: number): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return `${name}${pairs.length > 0 ? `{${pairs.join(",")}}` : ""} ${value}`;
}

export interface MetricsInput {
  readonly version: string;
  readonly workloads: readonly WorkloadCount[];
  readonly lastTick: TickFigures | null;
  readonly requests: RequestCounter;
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
  /** Every profile, with its breaker (degraded: the backend keeps refusing it). */
  readonly profiles?: readonly {
    readonly name: string;
    readonly degraded: boolean;
    readonly consecutiveRejections: number;
  }[];
}

export function renderMetrics(input: MetricsInput): string {
  const lines: string[] = [];
  const family = (name: string, type: "gauge" | "counter", help: string) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  };

  family("openai4s_build_info", "gauge", "Version of the running daemon.");
  lines.push(sample("openai4s_build_info", { version: input.version }, 1));

  family("openai4s_workloads", "gauge", "Workloads in the store by kind and phase.");
  for (const kind of WORKLOAD_KINDS) {
    for (const phase of PHASES) {
      const found = input.workloads.find((w) => w.kind === kind && w.phase === phase);
      lines.push(sample("openai4s_workloads", { kind, phase }, found?.count ?? 0));
    }
  }

  if (input.profiles !== undefined) {
    family(
      "openai4s_profile_degraded",
      "gauge",
      "1 while the backend keeps refusing this profile's submissions (its breaker is open).",
    );
    for (const p of input.profiles) {
      lines.push(sample("openai4s_profile_degraded", { profile: p.name }, p.degraded ? 1 : 0));
    }
    family(
      "openai4s_profile_consecutive_rejections",
      "gauge",
      "Submissions of this profile the backend refused in a row (0 after one succeeds).",
    );
    for (const p of input.profiles) {
      lines.push(
        sample(
          "openai4s_profile_consecutive_rejections",
          { profile: p.name },
          p.consecutiveRejections,
        ),
      );
    }
  }

  if (input.orphans !== undefined) {
    family(
      "openai4s_orphan_jobs",
      "gauge",
      "Jobs at the backend carrying this daemon's identity with no allocation row (last sweep).",
    );
    lines.push(sample("openai4s_orphan_jobs", {}, input.orphans?.jobs.length ?? 0));
    family(
      "openai4s_orphan_sweep_timestamp_seconds",
      "gauge",
      "When the last answered orphan sweep ran (0: none yet).",
    );
    const at = input.orphans?.lastSweepAt ?? null;
    lines.push(sample("openai4s_orphan_sweep_timestamp_seconds", {}, at === null ? 0 : at / 1000));
  }

  family(
    "openai4s_launches_sandboxed",
    "gauge",
    "1 when new jobs start inside the verified per-allocation sandbox.",
  );
  lines.push(sample("openai4s_launches_sandboxed", {}, input.isolation.launchesSandboxed ? 1 : 0));
  family(
    "openai4s_unsandboxed_batch_allowed",
    "gauge",
    "1 when started with --allow-unsandboxed-batch (BATCH may run as the daemon's uid unsandboxed).",
  );
  lines.push(
    sample(
      "openai4s_unsandboxed_batch_allowed",
      {},
      input.isolation.unsandboxedBatchAllowed ? 1 : 0,
    ),
  );
  family(
    "openai4s_batch_refused",
    "gauge",
    "1 while BATCH submissions are refused with ISOLATION_UNAVAILABLE.",
  );
  lines.push(sample("openai4s_batch_refused", {}, input.isolation.batchRefusal === null ? 0 : 1));

  const tick = input.lastTick;
  family(
    "openai4s_reconciler_last_tick_timestamp_seconds",
    "gauge",
    "When the last completed reconciler tick started (0: none yet).",
  );
  lines.push(
    sample("openai4s_reconciler_last_tick_timestamp_seconds", {}, tick ? tick.startedAt / 1000 : 0),
  );
  family(
    "openai4s_reconciler_last_tick_duration_seconds",
    "gauge",
    "Duration of the last completed reconciler tick.",
  );
  lines.push(
    sample("openai4s_reconciler_last_tick_duration_seconds", {}, tick ? tick.durationMs / 1000 : 0),
  );
  family(
    "openai4s_reconciler_last_tick_backend_calls",
    "gauge",
    "Calls to the backend made by the last completed reconciler tick, by port operation.",
  );
  for (const [operation, calls] of Object.entries(tick?.backendCalls ?? {})) {
    lines.push(sample("openai4s_reconciler_last_tick_backend_calls", { operation }, calls));
  }
  family(
    "openai4s_reconciler_last_tick_backend_calls_total",
    "gauge",
    "All calls to the backend made by the last completed reconciler tick.",
  );
  lines.push(
    sample("openai4s_reconciler_last_tick_backend_calls_total", {}, tick?.backendCallsTotal ?? 0),
  );
  family(
    "openai4s_reconciler_last_tick_backend_unavailable",
    "gauge",
    "1 when the backend did not answer during the last completed tick.",
  );
  lines.push(
    sample(
      "openai4s_reconciler_last_tick_backend_unavailable",
      {},
      tick?.backendUnavailable ? 1 : 0,
    ),
  );

  const backend = input.backend;
  family(
    "openai4s_backend_degraded",
    "gauge",
    "1 while a backend call is slow or the last one got no answer.",
  );
  lines.push(sample("openai4s_backend_degraded", {}, backend.degraded ? 1 : 0));
  family(
    "openai4s_backend_calls_per_second",
    "gauge",
    "Backend calls started per second over the last minute.",
  );
  lines.push(sample("openai4s_backend_calls_per_second", {}, backend.calls.perSecond));
  family("openai4s_backend_calls_total", "counter", "Backend calls by port operation.");
  for (const [operation, calls] of Object.entries(backend.calls.totals)) {
    lines.push(sample("openai4s_backend_calls_total", { operation }, calls));
  }
  family("openai4s_backend_commands_total", "counter", "The backend's own commands, by name.");
  for (const [command, calls] of Object.entries(backend.commands)) {
    lines.push(sample("openai4s_backend_commands_total", { command }, calls));
  }

  if (input.spool !== undefined) {
    family(
      "openai4s_spool_free_bytes",
      "gauge",
      "Bytes an unprivileged writer may still use in the spool (-1 when unread).",
    );
    lines.push(sample("openai4s_spool_free_bytes", {}, input.spool.freeBytes ?? -1));
    family(
      "openai4s_spool_low",
      "gauge",
      "1 while the spool is below its low-water mark: new submissions get 503 SPOOL_FULL.",
    );
    lines.push(sample("openai4s_spool_low", {}, input.spool.low ? 1 : 0));
  }

  family("openai4s_http_requests_total", "counter", "API requests served.");
  for (const { labels, value } of input.requests.snapshot().values()) {
    lines.push(sample("openai4s_http_requests_total", labels, value));
  }
  return `${lines.join("\n")}\n`;
}
