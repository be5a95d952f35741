/**
 * A Prometheus histogram with fixed buckets, cheap to observe: counts live in one
 * preallocated Float64Array, so `observe` allocates nothing and costs a short loop over the
 * bounds. The reconciler's tick and every API request observe one; a per-observation object
 * or string would show up in the tick benchmark at 10,000 transitions.
 */
export interface Histogram {
  /** Records one value, in seconds. Not finite values are dropped (a clock went backwards). */
  observe(seconds: number): void;
  /** Upper bounds (le) in seconds, ascending; +Inf is implied. */
  readonly boundsSeconds: readonly number[];
  /** Observations at or below each bound (cumulative), then the +Inf count. Fresh array. */
  cumulativeCounts(): readonly number[];
  sumSeconds(): number;
  count(): number;
}

export function createHistogram(boundsSeconds: readonly number[]): Histogram {
  const bounds = Float64Array.from(boundsSeconds);
  for (let i = 1; i < bounds.length; i++) {
    if (!((bounds[i] as number) > (bounds[i - 1] as number))) {
      throw new Error(`histogram bounds must ascend: ${boundsSeconds.join(", ")}`);
    }
  }
  // buckets[i]: observations in (bounds[i-1], bounds[i]]; the last slot is above every bound.
  const buckets = new Float64Array(bounds.length + 1);
  let sum = 0;
  let total = 0;
  return {
    boundsSeconds: [...boundsSeconds],
    observe(seconds) {
      if (!Number.isFinite(seconds)) return;
      let i = 0;
      while (i < bounds.length && seconds > (bounds[i] as number)) i++;
      buckets[i] = (buckets[i] as number) + 1;
      sum += seconds;
      total += 1;
    },
    cumulativeCounts() {
      const out: number[] = [];
      let running = 0;
      for (const n of buckets) {
        running += n;
        out.push(running);
      }
      return out;
    },
    sumSeconds: () => sum,
    count: () => total,
  };
}

/**
 * Histograms by one label value (a profile, a route), created on first use. The label values
 * must come from a bounded set the daemon controls (profile names from the cluster config,
 * route patterns), never from a request: each value is a series kept for the process's life.
 */
export interface LabelledHistograms {
  get(label: string): Histogram;
  entries(): IterableIterator<[string, Histogram]>;
  readonly boundsSeconds: readonly number[];
}

export function createLabelledHistograms(boundsSeconds: readonly number[]): LabelledHistograms {
  const byLabel = new Map<string, Histogram>();
  return {
    boundsSeconds,
    get(label) {
      let h = byLabel.get(label);
      if (h === undefined) {
        h = createHistogram(boundsSeconds);
        byLabel.set(label, h);
      }
      return h;
    },
    entries: () => byLabel.entries(),
  };
}
