/**
 * What the broker makes of a finished command (broker.ts): the error type, and the rules
 * that tell an answer from a refusal from no answer at all. Nothing here ever turns a
 * failure into an empty answer.
 */
import type { ProcessOutcome } from "../../lib/process-runner.ts";
import type { SlurmCommand } from "./broker.ts";
import type { Parsed } from "./parse.ts";

export type SlurmErrorKind =
  /** The call did not finish in time; its group was killed. No answer. */
  | "timed_out"
  /** No answer: the command is not on PATH, or the controller/database could not be reached. */
  | "unreachable"
  /** An answer, and it is no: the scheduler (or our own validation, before any call) refused. */
  | "refused"
  /** Something came back, but not something we can read. No answer. */
  | "malformed";

export class SlurmCommandError extends Error {
  override readonly name = "SlurmCommandError";
  constructor(
    readonly command: SlurmCommand,
    readonly kind: SlurmErrorKind,
    message: string,
    readonly exitCode: number | null = null,
  ) {
    super(`${command}: ${kind}: ${message}`);
  }
}

export type BrokerResult<T> =
  | { readonly kind: "Answered"; readonly value: T }
  | { readonly kind: "Failed"; readonly error: SlurmCommandError };

// ---------------------------------------------------------------------------------------
// Reading outcomes
// ---------------------------------------------------------------------------------------

/**
 * Messages that mean "no answer": the controller, the database or the authentication daemon
 * could not be reached, or the reply was lost. Matched case-insensitively against the tool's
 * own error lines. sbatch's "Batch job submission failed: Socket timed out ..." is here on
 * purpose: the job may well exist, so it must be Unknown, never Rejected.
 */
const UNREACHABLE_PATTERNS: readonly RegExp[] = [
  /unable to contact slurm controller/i,
  /socket timed out/i,
  /connection refused/i,
  /connection reset/i,
  /connection timed out/i,
  /communication connection failure/i,
  /zero bytes were transmitted or received/i,
  /problem talking to the database/i,
  /persist(ent)?[ _]conn/i,
  /slurmdbd.*(not responding|down|unavailable)/i,
  /slurm_load_jobs error: (?!invalid job id)/i,
  /temporarily unable/i,
  /temporarily unavailable/i,
  /transport endpoint/i,
  /no route to host/i,
  /network is unreachable/i,
  /munge/i,
  /authentication (error|failure)/i,
  /protocol authentication/i,
  /unable to (resolve|establish)/i,
  /backup controller/i,
  /could not (connect|establish)/i,
  // The client could not read slurm.conf (an admin mid-edit, a shared file system hiccup):
  // it never asked the controller, so a refused job would be a guess.
  /unable to process configuration file/i,
  /insane message length/i,
];

export function errorLines(command: SlurmCommand, stderr: string): string {
  if (command !== "srun") return stderr;
  // A step's stderr is mostly the task's own output, which may say anything (a program
  // printing "connection refused" is not a scheduler outage): only srun's lines count.
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("srun: error:") || l.startsWith("srun: fatal:"))
    .join("\n");
}

export function isUnreachableMessage(text: string): boolean {
  return UNREACHABLE_PATTERNS.some((p) => p.test(text));
}

export function shorten(text: string): string {
  const t = text.trim();
  return t.length > 600 ? `${t.slice(0, 600)}...` : t;
}

export type Completed = Extract<ProcessOutcome, { kind: "Exited" }>;

/**
 * Turns a process outcome into "it ran to an exit" or a classified failure (never ran, ran out
 * of time, said too much). Whether the exit means an answer is the next question.
 */
export function classifyOutcome(
  command: SlurmCommand,
  outcome: ProcessOutcome,
  limits: { readonly timeoutMs: number; readonly maxOutputBytes: number },
): BrokerResult<Completed> {
  switch (outcome.kind) {
    case "NotFound":
      return failed(command, "unreachable", outcome.message);
    case "TimedOut":
      return failed(command, "timed_out", `no answer within ${limits.timeoutMs} ms`);
    case "Overflowed":
      return failed(command, "malformed", `output exceeded ${limits.maxOutputBytes} bytes`);
    case "Exited":
      if (outcome.exitCode === null) {
        const text = shorten(errorLines(command, outcome.stderr));
        return failed(command, "unreachable", `ended by ${outcome.signal ?? "a signal"} ${text}`);
      }
      return { kind: "Answered", value: outcome };
    default: {
      const never: never = outcome;
      throw new Error(`unhandled process outcome ${JSON.stringify(never)}`);
    }
  }
}

/** Only exit 0 is an answer to parse; a nonzero exit is unreachable or refused by its text. */
export function requireSuccess(
  command: SlurmCommand,
  completed: Completed,
): BrokerResult<Completed> {
  if (completed.exitCode === 0) return { kind: "Answered", value: completed };
  const text = errorLines(command, completed.stderr);
  const kind: SlurmErrorKind = isUnreachableMessage(text) ? "unreachable" : "refused";
  return failed(
    command,
    kind,
    shorten(text) || `exit code ${completed.exitCode}`,
    completed.exitCode,
  );
}

export function failed<T>(
  command: SlurmCommand,
  kind: SlurmErrorKind,
  message: string,
  exitCode: number | null = null,
): BrokerResult<T> {
  return { kind: "Failed", error: new SlurmCommandError(command, kind, message, exitCode) };
}

export function fromParsed<T>(command: SlurmCommand, parsed: Parsed<T>): BrokerResult<T> {
  return parsed.kind === "Parsed"
    ? { kind: "Answered", value: parsed.value }
    : failed(command, "malformed", parsed.message);
}
