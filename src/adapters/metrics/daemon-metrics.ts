/**
 * The daemon's own instruments, one instance per daemon (no module-level registry): the
 * composition creates it, the reconciler, the store observer, the sessions engine and the
 * API record into it, and `/metrics` renders it (servers/http/system/metrics.ts). In memory only:
 * counters start at zero with the process, as Prometheus expects of a counter.
 */
import {
  EXEC_DURATION_BUCKETS_SECONDS,
  HTTP_DURATION_BUCKETS_SECONDS,
  QUEUE_WAIT_BUCKETS_SECONDS,
  SUBMIT_LATENCY_BUCKETS_SECONDS,
  TICK_DURATION_BUCKETS_SECONDS,
  TIME_TO_READY_BUCKETS_SECONDS,
} from "./buckets.ts";
import {
  createHistogram,
  createLabelledHistograms,
  type Histogram,
  type LabelledHistograms,
} from "./histogram.ts";

/** Workloads that ended, by kind, terminal phase and reason; keys are NUL-joined. */
export interface EndCounter {
  count(kind: string, phase: string, reason: string | null): void;
  entries(): Iterable<{
    readonly kind: string;
    readonly phase: string;
    readonly reason: string;
    readonly value: number;
  }>;
}

function createEndCounter(): EndCounter {
  const byKey = new Map<string, number>();
  return {
    count(kind, phase, reason) {
      const key = `${kind}\u0000${phase}\u0000${reason ?? ""}`;
      byKey.set(key, (byKey.get(key) ?? 0) + 1);
    },
    *entries() {
      for (const [key, value] of byKey) {
        const [kind = "", phase = "", reason = ""] = key.split("\u0000");
        yield { kind, phase, reason, value };
      }
    },
  };
}

export interface GatewayFigures {
  /** Workers admitted (fresh or resumed credential). */
  connections: number;
  disconnections: number;
  /** Peers refused at the handshake, whatever the cause (the gateway tells nobody why). */
  refusals: number;
}

export interface DaemonMetrics {
  /** Full reconciler ticks (submission passes excluded). */
  readonly tickDuration: Histogram;
  /** Workload accepted by the API until the backend answered its attempt's submit. */
  readonly submitLatency: Histogram;
  /** An attempt's QUEUED (backend accepted) to RUNNING, by profile. */
  readonly queueWait: LabelledHistograms;
  /** A session's creation until READY first held in this process, by profile. */
  readonly timeToReady: LabelledHistograms;
  /** One exec, request to outcome. */
  readonly execDuration: Histogram;
  /** API requests by `METHOD\u0000route pattern` (see httpKey). */
  readonly httpDuration: LabelledHistograms;
  readonly ends: EndCounter;
  readonly gateway: GatewayFigures;
  /** Epoch ms of the last backup streamed out whole; null: none since the daemon started. */
  lastBackupAt: number | null;
}

/** The one key format of `httpDuration`: the route is a pattern, never a raw path. */
export function httpKey(method: string, route: string): string {
  return `${method}\u0000${route}`;
}

export function createDaemonMetrics(): DaemonMetrics {
  return {
    tickDuration: createHistogram(TICK_DURATION_BUCKETS_SECONDS),
    submitLatency: createHistogram(SUBMIT_LATENCY_BUCKETS_SECONDS),
    queueWait: createLabelledHistograms(QUEUE_WAIT_BUCKETS_SECONDS),
    timeToReady: createLabelledHistograms(TIME_TO_READY_BUCKETS_SECONDS),
    execDuration: createHistogram(EXEC_DURATION_BUCKETS_SECONDS),
    httpDuration: createLabelledHistograms(HTTP_DURATION_BUCKETS_SECONDS),
    ends: createEndCounter(),
    gateway: { connections: 0, disconnections: 0, refusals: 0 },
    lastBackupAt: null,
  };
}
