/**
 * Prints, again, what bun said about each failed test and each error between tests, from the
 * test log: CI shows only the tail of a run, where bun's summary names a failed test but not
 * why (a Slurm test that failed only in CI could not be diagnosed from its landing report).
 * At most MAX_LINES lines, each failure cut to its first PER_FAILURE_LINES.
 */
const MAX_LINES = 120;
const PER_FAILURE_LINES = 40;

const path = process.argv[2];
if (!path) throw new Error("usage: failures.ts TEST_LOG");
const lines = (await Bun.file(path).text()).replace(/\x1b\[[0-9;]*m/g, "").split("\n");

const isBoundary = (line: string) => /^\((pass|fail|skip|todo)\) |^test\/\S+:$/.test(line);
const blocks: string[][] = [];
let errorStart = -1;
for (const [i, line] of lines.entries()) {
  if (line.startsWith("(fail) ")) {
    let start = i;
    while (start > 0 && !isBoundary(lines[start - 1] ?? "")) start--;
    let file = start;
    while (file > 0 && !/^test\/\S+:$/.test(lines[file] ?? "")) file--;
    const head = /^test\//.test(lines[file] ?? "") ? [lines[file] ?? ""] : [];
    blocks.push([...head, ...lines.slice(start, i + 1)]);
  } else if (/^# Unhandled error/.test(line)) {
    errorStart = i;
  } else if (errorStart >= 0 && /^-{10,}/.test(line) && i - errorStart > 1) {
    blocks.push(lines.slice(errorStart, i + 1));
    errorStart = -1;
  }
}
if (blocks.length > 0) {
  const out: string[] = ["", `=== ${blocks.length} failure(s) and error(s), again:`];
  for (const block of blocks) {
    const cut = block.length > PER_FAILURE_LINES;
    out.push("", ...(cut ? [...block.slice(0, PER_FAILURE_LINES - 1), "  [...]"] : block));
  }
  const shown = out.length > MAX_LINES ? [...out.slice(0, MAX_LINES - 1), "[...]"] : out;
  console.log(shown.join("\n"));
}
