/** How the pages write times and durations: short, in a person's units, never negative. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function ago(atMs: number, nowMs: number): string {
  return `${duration(nowMs - atMs)} ago`;
}

/** `2026-12-01 15:04:05 UTC`: the ISO instant without its T and milliseconds. */
export function utc(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}
