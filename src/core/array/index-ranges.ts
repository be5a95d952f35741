/**
 * Element indices written as ranges ("0-3,7,9-12"), the scheduler's own notation: a report
 * about a 1,000-element array must stay one line, not a thousand numbers.
 */

/** Sorted, de-duplicated indices as ranges; past `maxRanges`, "(+N more)" counts the rest. */
export function formatIndexRanges(indices: Iterable<number>, maxRanges = 20): string {
  const sorted = [...new Set(indices)].sort((a, b) => a - b);
  const ranges: string[] = [];
  let shown = 0;
  let i = 0;
  while (i < sorted.length && ranges.length < maxRanges) {
    const start = sorted[i] as number;
    let end = start;
    while (i + 1 < sorted.length && sorted[i + 1] === end + 1) {
      i += 1;
      end = sorted[i] as number;
    }
    ranges.push(start === end ? `${start}` : `${start}-${end}`);
    shown += end - start + 1;
    i += 1;
  }
  const rest = sorted.length - shown;
  return rest > 0 ? `${ranges.join(",")} (+${rest} more)` : ranges.join(",");
}
