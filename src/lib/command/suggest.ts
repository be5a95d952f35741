/**
 * "Did you mean": the known name closest to a mistyped one, so `openai4s lsit` or
 * `--time-limt` answers with the fix instead of a screen of help to search.
 */

/** Edit distance (insertions, deletions, substitutions, and a swap of two neighbours). */
function distance(a: string, b: string): number {
  const cols = b.length + 1;
  // One flat table, row-major: d[i * cols + j] is the distance of a[0..i) and b[0..j).
  const d = new Uint16Array((a.length + 1) * cols);
  const at = (i: number, j: number): number => d[i * cols + j] as number;
  for (let i = 0; i <= a.length; i++) d[i * cols] = i;
  for (let j = 0; j <= b.length; j++) d[j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, at(i - 2, j - 2) + 1);
      }
      d[i * cols + j] = best;
    }
  }
  return at(a.length, b.length);
}

/** A flag's dashes are not part of what was mistyped. */
const bare = (name: string): string => name.replace(/^-+/, "").toLowerCase();

/**
 * The closest of `known` to `typed`, or null when none is likely what was meant: the one
 * known name the typed one begins (`--time` for `--time-limit`), else the nearest within a
 * third of the typed length in edits (at least one), dashes not counted.
 */
export function closest(typed: string, known: readonly string[]): string | null {
  const word = bare(typed);
  const prefixed = known.filter((name) => word.length >= 3 && bare(name).startsWith(word));
  if (prefixed.length === 1) return prefixed[0] as string;
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  const allowed = Math.max(1, Math.floor(word.length / 3));
  for (const name of known) {
    const d = distance(word, bare(name));
    if (d < bestDistance && d <= allowed) {
      best = name;
      bestDistance = d;
    }
  }
  return best;
}

/** ` (did you mean "x"?)`, or nothing. */
export function didYouMean(typed: string, known: readonly string[]): string {
  const match = closest(typed, known);
  return match === null ? "" : ` (did you mean "${match}"?)`;
}
