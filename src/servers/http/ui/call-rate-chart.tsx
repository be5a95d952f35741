/** @jsxImportSource hono/jsx */
/**
 * The scheduler's call rate over the last hour as an inline SVG: no script, no library, and
 * presentation attributes only (the CSP allows no inline style). Labelled for screen
 * readers by its title and the figures printed beside it.
 */
import type { CallRatePoint } from "./call-rate-history.ts";
import { CALL_HISTORY_WINDOW_MS } from "./call-rate-history.ts";

const WIDTH = 640;
const HEIGHT = 180;
const LEFT = 44;
const BOTTOM = 22;
const TOP = 10;

function niceMax(value: number): number {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (value <= step * magnitude) return step * magnitude;
  return 10 * magnitude;
}

export function CallRateChart(props: {
  readonly points: readonly CallRatePoint[];
  readonly nowMs: number;
}) {
  const { points, nowMs } = props;
  const max = niceMax(Math.max(0, ...points.map((p) => p.perSecond)));
  const plotW = WIDTH - LEFT - 8;
  const plotH = HEIGHT - TOP - BOTTOM;
  const x = (atMs: number) =>
    LEFT + plotW * (1 - Math.min(1, (nowMs - atMs) / CALL_HISTORY_WINDOW_MS));
  const y = (v: number) => TOP + plotH * (1 - v / max);
  const line = points.map((p) => `${x(p.atMs).toFixed(1)},${y(p.perSecond).toFixed(1)}`).join(" ");
  const peak = points.reduce((m, p) => Math.max(m, p.perSecond), 0);
  const mean =
    points.length === 0 ? 0 : points.reduce((s, p) => s + p.perSecond, 0) / points.length;
  return (
    <figure>
      <svg
        class="chart"
        role="img"
        aria-labelledby="calls-title"
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        width={WIDTH}
        height={HEIGHT}
      >
        <title id="calls-title">{`Scheduler calls per second over the last hour: peak ${peak.toFixed(2)}, mean ${mean.toFixed(2)}`}</title>
        {[0, 0.5, 1].map((f) => (
          <g>
            <line x1={LEFT} x2={WIDTH - 8} y1={y(max * f)} y2={y(max * f)} stroke="#e1e5ea" />
            <text x={LEFT - 6} y={y(max * f) + 4} text-anchor="end" font-size="11" fill="#3b4652">
              {String(max * f)}
            </text>
          </g>
        ))}
        {[60, 45, 30, 15, 0].map((m) => (
          <text
            x={x(nowMs - m * 60_000)}
            y={HEIGHT - 6}
            text-anchor="middle"
            font-size="11"
            fill="#3b4652"
          >
            {m === 0 ? "now" : `-${m} min`}
          </text>
        ))}
        {points.length > 0 ? (
          <polyline points={line} fill="none" stroke="#0b5cad" stroke-width="2" />
        ) : null}
      </svg>
      <figcaption class="muted">
        Peak {peak.toFixed(2)}/s, mean {mean.toFixed(2)}/s over {points.length} samples.
      </figcaption>
    </figure>
  );
}
