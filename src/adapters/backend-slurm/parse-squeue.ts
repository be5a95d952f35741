/**
 * squeue's listing, parsed (a part of parse.ts, whose rules hold here: strict where a wrong
 * reading would change a decision), with the memo that keeps a steady tick from parsing
 * 10,000 unchanged lines again.
 * Over 400 lines because the memo's fast path must read every line exactly as the plain
 * parser does, and reads best beside it (test/slurm/squeue-memo.property.test.ts holds both).
 */
import type { ArrayTask } from "./array-job-id.ts";
import {
  excerpt,
  lines,
  malformed,
  type Parsed,
  parseEpochSeconds,
  parseRowHead,
  splitRow,
} from "./parse.ts";
import type { ExitStatus } from "./state-table.ts";

// ---------------------------------------------------------------------------------------
// squeue
// ---------------------------------------------------------------------------------------

export interface QueueRow {
  /** The job's id; for an element of a job array, the array's id (what sbatch answered). */
  readonly jobId: string;
  /** Only on a job array's rows: the element, or the elements still pending as one row. */
  readonly arrayTask?: ArrayTask;
  readonly name: string;
  /** The state word as printed (see state-table.ts). */
  readonly state: string;
  readonly exit: ExitStatus | null;
  /** Epoch ms; for a pending job the scheduler's estimate, so only read once it started. */
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  /** Why a job waits ("Resources", "Priority") or ended ("NonZeroExitCode"); free text. */
  readonly reason: string;
  readonly workDir: string;
  readonly comment: string;
}

/**
 * The fields asked of squeue, in order, with `|` after each but the last. `--Format`
 * (rather than `--format`) because only it reaches the exit code. Widths are given
 * explicitly: without one squeue pads (and cuts) every field to 20 characters.
 */
export const SQUEUE_FIELDS = [
  // JobArrayID, not JobID: the same id for a job that is no array (measured on 22.05), and
  // for an array's element "517_3" rather than an unrelated raw id, so rows find their array.
  "JobArrayID",
  "Name",
  "State",
  "exit_code",
  "StartTime",
  "EndTime",
  "Reason",
  "WorkDir",
  "Comment",
] as const;

function parseSqueueLine(line: string): Parsed<QueueRow> {
  const row = splitRow("squeue", line, SQUEUE_FIELDS.length);
  if (row.kind === "Malformed") return row;
  const [id, name, state, exit, start, end, reason, workDir, rawComment] = row.value.map((p) =>
    p.trim(),
  );
  const head = parseRowHead("squeue", line, { id, state, exit }, "wait-status");
  if (head.kind === "Malformed") return head;
  return {
    kind: "Parsed",
    value: {
      jobId: head.value.jobId,
      ...(head.value.arrayTask === undefined ? {} : { arrayTask: head.value.arrayTask }),
      name: name ?? "",
      state: head.value.state,
      exit: head.value.exit,
      startedAt: parseEpochSeconds(start ?? ""),
      endedAt: parseEpochSeconds(end ?? ""),
      reason: reason ?? "",
      workDir: workDir ?? "",
      // squeue prints "(null)" for a job without a comment.
      comment: rawComment === "(null)" ? "" : (rawComment ?? ""),
    },
  };
}

/**
 * The rows of the last listing parsed through it, by their exact line. A line printed again
 * byte for byte is the same row: it is not parsed again and its row is the same object, so a
 * caller tells "unchanged" by identity. At 10,000 jobs with a few changing per tick, that is
 * the difference between parsing 10,000 lines a tick and parsing a few.
 */
export interface SqueueMemo {
  /** Bumped by every parse, failed or not, so a failed parse's marks are never current. */
  generation: number;
  readonly byLine: Map<string, MemoEntry>;
  /** The last listing parsed whole (null after a failed parse: its counts are not kept). */
  last: MemoListing | null;
  /**
   * When the last parse patched the listing before it in place: the rows it started from,
   * the rows it answered, and the only indices at which they differ. A caller holding `from`
   * takes `to` in by these alone (the change feed), instead of comparing 10,000 rows.
   */
  patched: {
    readonly from: readonly QueueRow[];
    readonly to: readonly QueueRow[];
    readonly indices: readonly number[];
  } | null;
}

interface MemoListing {
  readonly text: string;
  /** The names it was filtered by (the same set object, or none). */
  readonly names: ReadonlySet<string> | undefined;
  /** One per line, in order (patched in place by the next listing read in place). */
  readonly entries: MemoEntry[];
  readonly rows: readonly QueueRow[];
  /** Per line, the index of its row in `rows`, or -1 for a line that is not one of ours. */
  readonly rowOf: Int32Array;
  /** Where every BLOCK_LINES-th line starts in `text`: unchanged blocks are compared whole. */
  readonly blockStarts: readonly number[];
}

interface MemoEntry {
  readonly line: string;
  /** Parsed the first time the line is kept; null while it is only someone else's job. */
  row: QueueRow | null;
  readonly head: LineHead;
  /**
   * Whether the head's name is in `oursIn`, the set last asked: the steady tick asks the
   * same set, and a pointer comparison is much cheaper than hashing 10,000 names again.
   */
  oursIn: ReadonlySet<string> | null;
  ours: boolean;
  seen: number;
  /** How many lines of the last listing are this line (someone else's free text repeats). */
  uses: number;
}

/** Lines compared as one block of text when nothing in them changed. */
const BLOCK_LINES = 64;

export function createSqueueMemo(): SqueueMemo {
  return { generation: 0, byLine: new Map(), last: null, patched: null };
}

/** A JobArrayID as squeue prints it: "517", "517_3", "517_[4-999%10]" (array-job-id.ts). */
const RECORD_ID = /^[1-9][0-9]{0,18}(?:_(?:[0-9]{1,7}|\[[0-9,:%-]+\]))?$/;

/** What is read of a line before deciding whether to parse it at all. */
interface LineHead {
  /** It begins with a job id: a record of its own, not the rest of the line before it. */
  readonly startsRecord: boolean;
  /** The Name field (the second), cut out without parsing the rest. */
  readonly name: string;
}

function squeueHead(line: string): LineHead {
  const first = line.indexOf("|");
  if (first < 0) return { startsRecord: false, name: "" };
  const second = line.indexOf("|", first + 1);
  return {
    startsRecord: RECORD_ID.test(line.slice(0, first).trim()),
    name: (second < 0 ? line.slice(first + 1) : line.slice(first + 1, second)).trim(),
  };
}

/**
 * Which lines of a listing by user are parsed. The listing holds every job of the service
 * account, and a job someone submitted by hand may carry a `|` or a newline in its name or
 * comment (measured on 22.05: both are printed raw). Our names are restricted to a class
 * without either, so:
 *  - a record whose Name is one of `names` is ours, and parsed strictly, as always;
 *  - a record of any other name is someone else's, and skipped unparsed;
 *  - a line that does not begin with a job id continues the record before it (a newline in
 *    its free text): skipped when that record was someone else's, and otherwise the answer
 *    is malformed, so garbage (an HTML error page, a message on stdout) still reads as no
 *    answer and never as an empty queue.
 */
type LineVerdict = "ours" | "theirs" | "malformed";

function lineVerdict(head: LineHead, ours: boolean, previous: LineVerdict | null): LineVerdict {
  if (!head.startsRecord) return previous === "theirs" ? "theirs" : "malformed";
  return ours ? "ours" : "theirs";
}

function oursIn(entry: MemoEntry, names: ReadonlySet<string>): boolean {
  if (entry.oursIn !== names) {
    entry.oursIn = names;
    entry.ours = names.has(entry.head.name);
  }
  return entry.ours;
}

/**
 * Parses the listing as `parseSqueue` does, reusing `memo`'s row for every line it has seen,
 * and leaves `memo` holding exactly this listing's lines. A malformed line fails the whole
 * answer (as always) and leaves no line of this listing in the memo that was not there.
 * The controller prints jobs in a stable order, so the common listing is the last one with a
 * few of our rows changed in place: that one costs a comparison per block of lines and a
 * parse per changed line (inPlace). Any other is read line by line: each line is compared in
 * place with the line at the same place last time (no substring, no hashing), and cut out and
 * looked up by content only when it differs.
 */
function parseSqueueMemo(
  stdout: string,
  memo: SqueueMemo,
  names: ReadonlySet<string> | undefined,
): Parsed<readonly QueueRow[]> {
  const last = memo.last;
  if (last !== null && last.text === stdout && last.names === names) {
    return { kind: "Parsed", value: last.rows };
  }
  memo.generation += 1;
  memo.patched = null;
  if (last !== null && last.names === names) {
    const rows = inPlace(stdout, memo, last, names);
    if (rows !== null) return { kind: "Parsed", value: rows };
  }
  const parsed = everyLine(stdout, memo, names);
  if (parsed.kind === "Malformed") memo.last = null;
  return parsed;
}

function everyLine(
  stdout: string,
  memo: SqueueMemo,
  names: ReadonlySet<string> | undefined,
): Parsed<readonly QueueRow[]> {
  const { generation } = memo;
  const previous = memo.last;
  const before = previous?.entries ?? [];
  const added: string[] = [];
  /** Lines of the last listing not found at their place: the only ones that may be gone. */
  const displaced: string[] = [];
  const entries: MemoEntry[] = [];
  const rows: QueueRow[] = [];
  const rowOf: number[] = [];
  const blockStarts: number[] = [];
  const undo = (failure: { readonly kind: "Malformed"; readonly message: string }) => {
    for (const l of added) memo.byLine.delete(l);
    return failure;
  };
  let verdict: LineVerdict | null = null;
  // As lines(): every piece between newlines, but no empty piece after a final newline.
  for (let pos = 0, i = 0; pos < stdout.length; i++) {
    if (i % BLOCK_LINES === 0) blockStarts.push(pos);
    const there = before[i];
    let entry: MemoEntry | undefined;
    if (there !== undefined && sameLineAt(stdout, pos, there.line)) {
      entry = there;
      pos += there.line.length + 1;
    } else {
      const newline = stdout.indexOf("\n", pos);
      const stop = newline < 0 ? stdout.length : newline;
      const line = stdout.slice(pos, stop);
      pos = stop + 1;
      if (there !== undefined) displaced.push(there.line);
      entry = memo.byLine.get(line);
      if (entry === undefined) {
        entry = newEntry(line);
        memo.byLine.set(line, entry);
        added.push(line);
      }
    }
    if (entry.seen === generation) entry.uses += 1;
    else {
      entry.seen = generation;
      entry.uses = 1;
    }
    entries.push(entry);
    rowOf.push(-1);
    if (names !== undefined) {
      verdict = lineVerdict(entry.head, oursIn(entry, names), verdict);
      if (verdict === "theirs") continue;
      if (verdict === "malformed") return undo(malformed(`squeue line ${excerpt(entry.line)}`));
    }
    if (entry.row === null) {
      const row = parseSqueueLine(entry.line);
      if (row.kind === "Malformed") return undo(row);
      entry.row = row.value;
    }
    rowOf[i] = rows.length;
    rows.push(entry.row);
  }
  for (let i = entries.length; i < before.length; i++) displaced.push(before[i]?.line ?? "");
  // After a failed parse there is no last listing to go by: every line kept is looked at.
  for (const line of previous === null ? memo.byLine.keys() : displaced) {
    if (memo.byLine.get(line)?.seen !== generation) memo.byLine.delete(line);
  }
  memo.last = { text: stdout, names, entries, rows, rowOf: Int32Array.from(rowOf), blockStarts };
  return { kind: "Parsed", value: rows };
}

function newEntry(line: string): MemoEntry {
  return { line, row: null, head: squeueHead(line), oursIn: null, ours: false, seen: 0, uses: 0 };
}

interface Change {
  readonly index: number;
  readonly line: string;
  entry: MemoEntry | null;
}

/**
 * The listing as the last one with some lines changed in place: as many lines, and each
 * changed line one of our records where one of ours was (so every other line reads as
 * before). Null when it is not, or when a changed line does not parse (everyLine then gives
 * the answer); otherwise the new rows, and the memo holds this listing.
 */
function inPlace(
  stdout: string,
  memo: SqueueMemo,
  last: MemoListing,
  names: ReadonlySet<string> | undefined,
): readonly QueueRow[] | null {
  const scanned = changedLines(stdout, last);
  if (scanned === null) return null;
  const { changes, blockStarts } = scanned;
  const fresh = new Map<string, MemoEntry>();
  for (const change of changes) {
    if (last.rowOf[change.index] === -1) return null;
    let entry = memo.byLine.get(change.line) ?? fresh.get(change.line);
    if (entry === undefined) {
      entry = newEntry(change.line);
      fresh.set(change.line, entry);
    }
    if (names !== undefined && !(entry.head.startsRecord && oursIn(entry, names))) return null;
    if (entry.row === null) {
      const row = parseSqueueLine(change.line);
      if (row.kind === "Malformed") return null;
      entry.row = row.value;
    }
    change.entry = entry;
  }
  // Nothing below can fail: the memo becomes this listing.
  const entries = last.entries;
  const rows = changes.length === 0 ? last.rows : last.rows.slice();
  const indices: number[] = [];
  for (const { index, entry } of changes) {
    const gone = last.entries[index] as MemoEntry;
    gone.uses -= 1;
    if (gone.uses === 0 && memo.byLine.get(gone.line) === gone) memo.byLine.delete(gone.line);
    if (entry === null) continue;
    if (entry.uses === 0) memo.byLine.set(entry.line, entry);
    entry.uses += 1;
    entries[index] = entry;
    const at = last.rowOf[index] as number;
    (rows as QueueRow[])[at] = entry.row as QueueRow;
    indices.push(at);
  }
  memo.last = { text: stdout, names, entries, rows, rowOf: last.rowOf, blockStarts };
  memo.patched = { from: last.rows, to: rows, indices };
  return rows;
}

/**
 * The lines of `stdout` that differ from the last listing's at the same place, and where
 * this listing's blocks start; null when it has more or fewer lines, or so many changed that
 * reading it line by line is as cheap. A block of the last listing printed again whole is
 * one comparison.
 */
function changedLines(
  stdout: string,
  last: MemoListing,
): { readonly changes: Change[]; readonly blockStarts: number[] } | null {
  const count = last.entries.length;
  const limit = Math.max(BLOCK_LINES, count / 8);
  const changes: Change[] = [];
  const blockStarts: number[] = [];
  let pos = 0;
  for (let block = 0; block * BLOCK_LINES < count; block++) {
    blockStarts.push(pos);
    const first = block * BLOCK_LINES;
    const end = Math.min(count, first + BLOCK_LINES);
    // A whole block ends with the newline before the next block's first line.
    const next = last.blockStarts[block + 1];
    if (next !== undefined) {
      const from = last.blockStarts[block] as number;
      if (stdout.startsWith(last.text.slice(from, next), pos)) {
        pos += next - from;
        continue;
      }
    }
    for (let i = first; i < end; i++) {
      if (pos >= stdout.length) return null;
      const line = (last.entries[i] as MemoEntry).line;
      if (sameLineAt(stdout, pos, line)) {
        pos += line.length + 1;
        continue;
      }
      const newline = stdout.indexOf("\n", pos);
      const stop = newline < 0 ? stdout.length : newline;
      changes.push({ index: i, line: stdout.slice(pos, stop), entry: null });
      if (changes.length > limit) return null;
      pos = stop + 1;
    }
  }
  return pos < stdout.length ? null : { changes, blockStarts };
}

/** Whether `line` is printed whole at `pos` of `text`: followed by a newline or the end. */
function sameLineAt(text: string, pos: number, line: string): boolean {
  const end = pos + line.length;
  return (end === text.length || text.charCodeAt(end) === 10) && text.startsWith(line, pos);
}

/**
 * The rows of an squeue listing. With `names`, only our records are parsed and returned
 * (the listing is by user: see lineVerdict); without, every line.
 */
export function parseSqueue(
  stdout: string,
  memo?: SqueueMemo,
  names?: ReadonlySet<string>,
): Parsed<readonly QueueRow[]> {
  if (memo !== undefined) return parseSqueueMemo(stdout, memo, names);
  const out: QueueRow[] = [];
  let verdict: LineVerdict | null = null;
  for (const line of lines(stdout)) {
    if (names !== undefined) {
      const head = squeueHead(line);
      verdict = lineVerdict(head, names.has(head.name), verdict);
      if (verdict === "theirs") continue;
      if (verdict === "malformed") return malformed(`squeue line ${excerpt(line)}`);
    }
    const row = parseSqueueLine(line);
    if (row.kind === "Malformed") return row;
    out.push(row.value);
  }
  return { kind: "Parsed", value: out };
}
