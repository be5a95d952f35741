/**
 * squeue's listing, parsed (a part of parse.ts, whose rules hold here: strict where a wrong
 * reading would change a decision), with the memo that keeps a steady tick from parsing
 * 10,000 unchanged lines again.
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
  /** The last listing parsed whole, its lines and its rows in order (the cheap path). */
  last: {
    readonly text: string;
    /** The names it was filtered by (the same set object, or none). */
    readonly names: ReadonlySet<string> | undefined;
    readonly lines: readonly string[];
    readonly entries: readonly MemoEntry[];
    readonly rows: readonly QueueRow[];
  } | null;
}

interface MemoEntry {
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
}

export function createSqueueMemo(): SqueueMemo {
  return { generation: 0, byLine: new Map(), last: null };
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
 * The controller prints jobs in a stable order, so a line is first compared with the line
 * at the same place last time (no hashing), and looked up by content only when it moved.
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
  const generation = memo.generation;
  const added: string[] = [];
  const all = lines(stdout);
  const entries: MemoEntry[] = new Array(all.length);
  const rows: QueueRow[] = [];
  const undo = (failure: { readonly kind: "Malformed"; readonly message: string }) => {
    for (const l of added) memo.byLine.delete(l);
    return failure;
  };
  let distinct = 0;
  let verdict: LineVerdict | null = null;
  for (let i = 0; i < all.length; i++) {
    const line = all[i] as string;
    let entry = last !== null && last.lines[i] === line ? last.entries[i] : undefined;
    entry ??= memo.byLine.get(line);
    if (entry === undefined) {
      entry = { row: null, head: squeueHead(line), oursIn: null, ours: false, seen: generation };
      memo.byLine.set(line, entry);
      added.push(line);
      distinct += 1;
    } else if (entry.seen !== generation) {
      entry.seen = generation;
      distinct += 1;
    }
    entries[i] = entry;
    if (names !== undefined) {
      verdict = lineVerdict(entry.head, oursIn(entry, names), verdict);
      if (verdict === "theirs") continue;
      if (verdict === "malformed") return undo(malformed(`squeue line ${excerpt(line)}`));
    }
    if (entry.row === null) {
      const row = parseSqueueLine(line);
      if (row.kind === "Malformed") return undo(row);
      entry.row = row.value;
    }
    rows.push(entry.row);
  }
  if (distinct < memo.byLine.size) {
    for (const [line, entry] of memo.byLine) {
      if (entry.seen !== generation) memo.byLine.delete(line);
    }
  }
  memo.last = { text: stdout, names, lines: all, entries, rows };
  return { kind: "Parsed", value: rows };
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
