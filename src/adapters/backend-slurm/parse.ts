/**
 * Parsers for what sbatch, squeue and sacct print, for the exact formats the broker asks for.
 *
 * Strict where a wrong reading would change a decision: a job id, a state word, an exit status
 * or a row with the wrong number of fields makes the WHOLE answer malformed, and a malformed
 * answer is an unavailable answer, never "no such job". A listing that parses to zero rows
 * because it was garbage would otherwise declare every job lost. Lenient only for times,
 * which are informational: an unreadable time is null.
 *
 * Free-text fields come last and may contain the separator: the comment is the final field,
 * so a `|` inside it cannot shift the fields before it. Job names in the rows parsed are ours
 * (sacct queries filter by our names or ids; the squeue listing, by user, is filtered here by
 * our names before any line is parsed) and are restricted by the broker to a character class
 * without `|`.
 */
import { type ArrayTask, parseArrayJobId } from "./array-job-id.ts";
import type { ExitStatus } from "./state-table.ts";

export type Parsed<T> =
  | { readonly kind: "Parsed"; readonly value: T }
  | { readonly kind: "Malformed"; readonly message: string };

const JOB_ID = /^[1-9][0-9]{0,18}$/;
const STATE_WORD = /^[A-Z_]+\+?( by -?[0-9]+)?$/;

export function isJobId(raw: string): boolean {
  return JOB_ID.test(raw);
}

function malformed(message: string): { readonly kind: "Malformed"; readonly message: string } {
  return { kind: "Malformed", message };
}

function lines(text: string): string[] {
  const out = text.split("\n");
  if (out.at(-1) === "") out.pop();
  return out;
}

/** A quoted, shortened line for messages: never dump a whole listing into a log. */
function excerpt(line: string): string {
  return JSON.stringify(line.length > 120 ? `${line.slice(0, 120)}...` : line);
}

// ---------------------------------------------------------------------------------------
// sbatch --parsable
// ---------------------------------------------------------------------------------------

/** `--parsable` prints "jobid" or "jobid;cluster" and nothing else on stdout. */
export function parseSbatchParsable(stdout: string): Parsed<string> {
  const rows = lines(stdout.trim());
  if (rows.length !== 1) return malformed(`expected one line with a job id, got ${rows.length}`);
  const match = /^([0-9]+)(?:;[A-Za-z0-9_.-]+)?$/.exec(rows[0] ?? "");
  const id = match?.[1];
  if (id === undefined || !isJobId(id)) {
    return malformed(`no job id in sbatch answer ${excerpt(rows[0] ?? "")}`);
  }
  return { kind: "Parsed", value: id };
}

// ---------------------------------------------------------------------------------------
// Times and exit codes
// ---------------------------------------------------------------------------------------

/**
 * Times are requested as epoch seconds (SLURM_TIME_FORMAT=%s). "N/A", "Unknown", "None",
 * empty and 0 all mean "not (yet) known".
 */
function parseEpochSeconds(raw: string): number | null {
  const t = raw.trim();
  if (!/^[0-9]{1,12}$/.test(t)) return null;
  const seconds = Number(t);
  return seconds > 0 ? seconds * 1000 : null;
}

/**
 * sacct prints ExitCode as `code:signal`; squeue's exit_code is the raw wait status (768 for
 * exit 3, 9 for SIGKILL, measured on 22.05). Each tool is read in its own form only: a bare
 * number from sacct is not an answer we asked for. Empty means none.
 */
export function parseExitStatus(
  raw: string,
  form: "code:signal" | "wait-status",
): Parsed<ExitStatus | null> {
  const t = raw.trim();
  if (t === "" || t === "N/A") return { kind: "Parsed", value: null };
  if (form === "wait-status") {
    if (!/^[0-9]{1,5}$/.test(t)) return malformed(`exit status ${excerpt(t)} is not a wait status`);
    const status = Number(t);
    if (status > 0xffff) return malformed(`exit status ${excerpt(t)} is out of range`);
    return { kind: "Parsed", value: { code: (status >> 8) & 0xff, signal: status & 0x7f } };
  }
  const match = /^([0-9]{1,3}):([0-9]{1,3})$/.exec(t);
  if (!match) return malformed(`exit status ${excerpt(t)} is not code:signal`);
  const code = Number(match[1]);
  const signal = Number(match[2]);
  if (code > 255 || signal > 255) return malformed(`exit status ${excerpt(t)} is out of range`);
  return { kind: "Parsed", value: { code, signal } };
}

function parseState(raw: string): Parsed<string> {
  const t = raw.trim();
  if (!STATE_WORD.test(t)) return malformed(`state ${excerpt(t)} is not a state word`);
  return { kind: "Parsed", value: t };
}

/**
 * One `|`-separated row of `count` fields; the last, the free-text comment, keeps any `|` it
 * contains. Fewer fields than asked for makes the row (and so the answer) malformed.
 */
function splitRow(tool: string, line: string, count: number): Parsed<readonly string[]> {
  const parts = line.split("|");
  if (parts.length < count) {
    return malformed(
      `${tool} line has ${parts.length} fields, expected ${count}: ${excerpt(line)}`,
    );
  }
  return {
    kind: "Parsed",
    value: [...parts.slice(0, count - 1), parts.slice(count - 1).join("|")],
  };
}

interface RowHead {
  readonly jobId: string;
  readonly state: string;
  readonly exit: ExitStatus | null;
  /** Only on a job array's rows: which element(s) the row is; jobId is then the array's. */
  readonly arrayTask?: ArrayTask;
}

/** The fields every listing row starts with and every decision rests on, read strictly. */
function parseRowHead(
  tool: string,
  line: string,
  fields: {
    readonly id: string | undefined;
    readonly state: string | undefined;
    readonly exit: string | undefined;
  },
  exitForm: "code:signal" | "wait-status",
): Parsed<RowHead> {
  const id = parseArrayJobId(fields.id ?? "");
  if (id.kind === "Malformed") return malformed(`${tool} job id in ${excerpt(line)}`);
  const parsedState = parseState(fields.state ?? "");
  if (parsedState.kind === "Malformed") return parsedState;
  const parsedExit = parseExitStatus(fields.exit ?? "", exitForm);
  if (parsedExit.kind === "Malformed") return parsedExit;
  return {
    kind: "Parsed",
    value: {
      jobId: id.jobId,
      state: parsedState.value,
      exit: parsedExit.value,
      ...(id.kind === "Array" ? { arrayTask: id.task } : {}),
    },
  };
}

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

// ---------------------------------------------------------------------------------------
// sacct
// ---------------------------------------------------------------------------------------

export interface AccountingRow {
  /** As QueueRow.jobId: an array element's row carries the array's id and its arrayTask. */
  readonly jobId: string;
  readonly arrayTask?: ArrayTask;
  readonly name: string;
  readonly state: string;
  readonly exit: ExitStatus | null;
  readonly submittedAt: number | null;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  /** Empty unless the site stores comments (AccountingStoreFlags=job_comment) and the job ended. */
  readonly comment: string;
}

/** `--format` for sacct `--parsable2` (fields separated by `|`, none cut). Comment last. */
export const SACCT_FIELDS = [
  "JobID",
  "JobName",
  "State",
  "ExitCode",
  "Submit",
  "Start",
  "End",
  "Comment",
] as const;

export function parseSacct(stdout: string): Parsed<readonly AccountingRow[]> {
  const out: AccountingRow[] = [];
  for (const line of lines(stdout)) {
    const row = splitRow("sacct", line, SACCT_FIELDS.length);
    if (row.kind === "Malformed") return row;
    const [id, name, state, exit, submit, start, end, comment] = row.value;
    // --allocations leaves only job rows; a step row ("123.batch") here means the query was
    // not what we asked for, and its state would be read as the job's.
    const head = parseRowHead("sacct", line, { id, state, exit }, "code:signal");
    if (head.kind === "Malformed") return head;
    out.push({
      jobId: head.value.jobId,
      ...(head.value.arrayTask === undefined ? {} : { arrayTask: head.value.arrayTask }),
      name: name ?? "",
      state: head.value.state,
      exit: head.value.exit,
      submittedAt: parseEpochSeconds(submit ?? ""),
      startedAt: parseEpochSeconds(start ?? ""),
      endedAt: parseEpochSeconds(end ?? ""),
      comment: comment ?? "",
    });
  }
  return { kind: "Parsed", value: out };
}

// ---------------------------------------------------------------------------------------
// sacct usage (steps included): why a job ended, in numbers a person can act on
// ---------------------------------------------------------------------------------------

/** Per job: what it asked for and what it used. Every field is informational (null = unknown). */
export interface JobUsage {
  readonly jobId: string;
  readonly requestedMemoryBytes: number | null;
  /** The largest resident set of any of its steps. */
  readonly maxRssBytes: number | null;
  readonly elapsedSeconds: number | null;
  readonly timeLimitSeconds: number | null;
}

/** `--format` for the usage query (job and step rows, `--parsable2`). */
export const USAGE_FIELDS = ["JobID", "ReqMem", "MaxRSS", "ElapsedRaw", "TimelimitRaw"] as const;

const SIZE_UNITS: Readonly<Record<string, number>> = {
  "": 1,
  K: 1024,
  M: 1024 ** 2,
  G: 1024 ** 3,
  T: 1024 ** 4,
};

/**
 * sacct sizes: "317464K", "50M", "2G"; older versions append n (per node) or c (per CPU) to
 * ReqMem. Anything else (including the "16?" measured while a job was being written) is null.
 */
export function parseSize(raw: string): number | null {
  const match = /^([0-9]+(?:\.[0-9]+)?)([KMGT]?)[nc]?$/.exec(raw.trim());
  if (!match) return null;
  const unit = SIZE_UNITS[match[2] ?? ""];
  return unit === undefined ? null : Math.round(Number(match[1]) * unit);
}

function parseWholeNumber(raw: string): number | null {
  const t = raw.trim();
  return /^[0-9]{1,12}$/.test(t) ? Number(t) : null;
}

/**
 * Rows are "123" (the job) and "123.batch", "123.0" (its steps). A job id that does not
 * parse makes the answer malformed, as everywhere; the numbers are read leniently.
 */
export function parseUsage(stdout: string): Parsed<readonly JobUsage[]> {
  const byJob = new Map<string, JobUsage>();
  for (const line of lines(stdout)) {
    const row = splitRow("sacct", line, USAGE_FIELDS.length);
    if (row.kind === "Malformed") return row;
    const [rawId, reqMem, maxRss, elapsed, limit] = row.value.map((p) => p.trim());
    const match = /^([0-9]+)(?:\.[A-Za-z0-9_+]+)?$/.exec(rawId ?? "");
    const jobId = match?.[1];
    if (jobId === undefined || !isJobId(jobId)) {
      return malformed(`sacct job id in ${excerpt(line)}`);
    }
    const previous = byJob.get(jobId) ?? {
      jobId,
      requestedMemoryBytes: null,
      maxRssBytes: null,
      elapsedSeconds: null,
      timeLimitSeconds: null,
    };
    const rss = parseSize(maxRss ?? "");
    const isJobRow = rawId === jobId;
    const minutes = parseWholeNumber(limit ?? "");
    byJob.set(jobId, {
      jobId,
      requestedMemoryBytes: isJobRow
        ? (parseSize(reqMem ?? "") ?? previous.requestedMemoryBytes)
        : previous.requestedMemoryBytes,
      maxRssBytes: rss === null ? previous.maxRssBytes : Math.max(rss, previous.maxRssBytes ?? 0),
      elapsedSeconds: isJobRow ? parseWholeNumber(elapsed ?? "") : previous.elapsedSeconds,
      timeLimitSeconds: isJobRow
        ? minutes === null
          ? null
          : minutes * 60
        : previous.timeLimitSeconds,
    });
  }
  return { kind: "Parsed", value: [...byJob.values()] };
}

// ---------------------------------------------------------------------------------------
// squeue of every live job of the service account (the orphan sweep)
// ---------------------------------------------------------------------------------------

export interface LiveJobRow {
  readonly jobId: string;
  readonly state: string;
  /** Free text from any job of the account: last, so a `|` in it cannot shift a field. */
  readonly comment: string;
}

export const LIVE_JOB_FIELDS = ["JobID", "State", "Comment"] as const;

export function parseLiveJobs(stdout: string): Parsed<readonly LiveJobRow[]> {
  const out: LiveJobRow[] = [];
  for (const line of lines(stdout)) {
    const row = splitRow("squeue", line, LIVE_JOB_FIELDS.length);
    if (row.kind === "Malformed") return row;
    const [id, state, comment] = row.value.map((p) => p.trim());
    if (id === undefined || !isJobId(id)) return malformed(`squeue job id in ${excerpt(line)}`);
    const parsedState = parseState(state ?? "");
    if (parsedState.kind === "Malformed") return parsedState;
    out.push({
      jobId: id,
      state: parsedState.value,
      comment: comment === "(null)" ? "" : (comment ?? ""),
    });
  }
  return { kind: "Parsed", value: out };
}
