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
 * so a `|` inside it cannot shift the fields before it. Job names in these listings are ours
 * (queries filter by our names or ids) and are restricted by the broker to a character class
 * without `|`.
 */
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

// ---------------------------------------------------------------------------------------
// squeue
// ---------------------------------------------------------------------------------------

export interface QueueRow {
  readonly jobId: string;
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
  "JobID",
  "Name",
  "State",
  "exit_code",
  "StartTime",
  "EndTime",
  "Reason",
  "WorkDir",
  "Comment",
] as const;

export function parseSqueue(stdout: string): Parsed<readonly QueueRow[]> {
  const out: QueueRow[] = [];
  const fieldCount = SQUEUE_FIELDS.length;
  for (const line of lines(stdout)) {
    const parts = line.split("|");
    if (parts.length < fieldCount) {
      return malformed(
        `squeue line has ${parts.length} fields, expected ${fieldCount}: ${excerpt(line)}`,
      );
    }
    const [id, name, state, exit, start, end, reason, workDir] = parts.map((p) => p.trim());
    // squeue prints "(null)" for a job without a comment.
    const rawComment = parts
      .slice(fieldCount - 1)
      .join("|")
      .trim();
    const comment = rawComment === "(null)" ? "" : rawComment;
    if (id === undefined || !isJobId(id)) return malformed(`squeue job id in ${excerpt(line)}`);
    const parsedState = parseState(state ?? "");
    if (parsedState.kind === "Malformed") return parsedState;
    const parsedExit = parseExitStatus(exit ?? "", "wait-status");
    if (parsedExit.kind === "Malformed") return parsedExit;
    out.push({
      jobId: id,
      name: name ?? "",
      state: parsedState.value,
      exit: parsedExit.value,
      startedAt: parseEpochSeconds(start ?? ""),
      endedAt: parseEpochSeconds(end ?? ""),
      reason: reason ?? "",
      workDir: workDir ?? "",
      comment,
    });
  }
  return { kind: "Parsed", value: out };
}

// ---------------------------------------------------------------------------------------
// sacct
// ---------------------------------------------------------------------------------------

export interface AccountingRow {
  readonly jobId: string;
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
  const fieldCount = SACCT_FIELDS.length;
  for (const line of lines(stdout)) {
    const parts = line.split("|");
    if (parts.length < fieldCount) {
      return malformed(
        `sacct line has ${parts.length} fields, expected ${fieldCount}: ${excerpt(line)}`,
      );
    }
    const [id, name, state, exit, submit, start, end] = parts;
    const comment = parts.slice(fieldCount - 1).join("|");
    // --allocations leaves only job rows; a step row ("123.batch") here means the query was
    // not what we asked for, and its state would be read as the job's.
    if (id === undefined || !isJobId(id)) return malformed(`sacct job id in ${excerpt(line)}`);
    const parsedState = parseState(state ?? "");
    if (parsedState.kind === "Malformed") return parsedState;
    const parsedExit = parseExitStatus(exit ?? "", "code:signal");
    if (parsedExit.kind === "Malformed") return parsedExit;
    out.push({
      jobId: id,
      name: name ?? "",
      state: parsedState.value,
      exit: parsedExit.value,
      submittedAt: parseEpochSeconds(submit ?? ""),
      startedAt: parseEpochSeconds(start ?? ""),
      endedAt: parseEpochSeconds(end ?? ""),
      comment,
    });
  }
  return { kind: "Parsed", value: out };
}
