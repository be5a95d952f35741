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

export function malformed(message: string): {
  readonly kind: "Malformed";
  readonly message: string;
} {
  return { kind: "Malformed", message };
}

export function lines(text: string): string[] {
  const out = text.split("\n");
  if (out.at(-1) === "") out.pop();
  return out;
}

/** A quoted, shortened line for messages: never dump a whole listing into a log. */
export function excerpt(line: string): string {
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
export function parseEpochSeconds(raw: string): number | null {
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
export function splitRow(tool: string, line: string, count: number): Parsed<readonly string[]> {
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
export function parseRowHead(
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
