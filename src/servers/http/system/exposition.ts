/**
 * The Prometheus text format's pieces (0.0.4): escaped labels, Go-style numbers, a family
 * declared once with its HELP and TYPE, histograms as cumulative buckets; and the HTTP
 * request counter the app feeds. metrics.ts writes the daemon's sections with them.
 */
import type { Histogram } from "../../../adapters/metrics/histogram.ts";

/** Requests served, by method, route pattern and status; owned by one app instance. */
export interface RequestCounter {
  count(method: string, route: string, status: number): void;
  snapshot(): ReadonlyMap<string, { readonly labels: Labels; readonly value: number }>;
}

export type Labels = Readonly<Record<string, string>>;

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
  return `${name}${pairs.length > 0 ? `{${pairs.join(",")}}` : ""} ${formatNumber(value)}`;
}

/** Go-style float text: Prometheus parses "+Inf", integers and decimals. */
function formatNumber(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return Number.isNaN(value) ? "NaN" : String(value);
}

/** Collects lines; each family is declared once with its HELP and TYPE. */
export class Exposition {
  readonly lines: string[] = [];

  family(name: string, type: "gauge" | "counter" | "histogram", help: string): void {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  }

  sample(name: string, labels: Labels, value: number): void {
    this.lines.push(sample(name, labels, value));
  }

  /** One histogram series: cumulative buckets, +Inf, sum and count. */
  histogram(name: string, labels: Labels, h: Histogram): void {
    const counts = h.cumulativeCounts();
    h.boundsSeconds.forEach((le, i) => {
      this.sample(`${name}_bucket`, { ...labels, le: formatNumber(le) }, counts[i] ?? 0);
    });
    this.sample(`${name}_bucket`, { ...labels, le: "+Inf" }, h.count());
    this.sample(`${name}_sum`, labels, h.sumSeconds());
    this.sample(`${name}_count`, labels, h.count());
  }
}
