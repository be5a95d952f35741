/**
 * The session port: what the edges (the API, the CLI through it, tests) need from the
 * sessions engine, and nothing more. Owned by the core, which implements it
 * (session/exec-service.ts); defining it in the API made the core depend on its own caller. The
 * daemon injects an
 * implementation when sessions are enabled; without one, exec answers 409 instead of
 * pretending. Outcomes are a union so a handler cannot forget "not ready" or "no such
 * session" (each maps to its own status).
 *
 * Outputs are Jupyter's message contents, named as Jupyter names them, so a Jupyter client
 * maps them one to one: `stream` (stdout/stderr text), `display_data` (a display() call or a
 * figure), `execute_result` (the last expression), `error` (what the cell raised).
 */

/** MIME type → content ("image/png" base64, "application/json" as JSON text). */
export type MimeBundle = Readonly<Record<string, string>>;

export type ExecOutput =
  | { readonly type: "stream"; readonly name: "stdout" | "stderr"; readonly text: string }
  | { readonly type: "display_data"; readonly data: MimeBundle }
  | { readonly type: "execute_result"; readonly data: MimeBundle }
  | {
      readonly type: "error";
      readonly ename: string;
      readonly evalue: string;
      readonly traceback: string;
    };

export type ExecOutcome =
  /** The kernel ran the code. `status: "ERROR"` is the code's failure, not the daemon's. */
  | ExecOk
  /** The session exists but is not READY (message names the missing condition). */
  | { readonly kind: "NotReady"; readonly message: string }
  /** The sessions engine does not know this workload as a session. */
  | { readonly kind: "NotFound" };

export interface ExecOk {
  readonly kind: "Ok";
  readonly status: "OK" | "ERROR";
  /** stdout, stderr and the last value's text/plain, joined: what a terminal shows. */
  readonly output: string;
  /** The traceback when status is ERROR. */
  readonly error: string | null;
  /** Everything the cell produced, in order (streams merged where adjacent). */
  readonly outputs: readonly ExecOutput[];
  /** The kernel had died; this ran in a fresh one and every earlier variable is gone. */
  readonly kernelRestarted: boolean;
}

export type InterruptOutcome =
  /** `interrupted` is false when no cell was running: there was nothing to interrupt. */
  | { readonly kind: "Ok"; readonly interrupted: boolean }
  | { readonly kind: "NotReady"; readonly message: string }
  | { readonly kind: "NotFound" };

/** What an explicit restart did: a fresh kernel, or why there is none. */
export type RestartOutcome =
  | { readonly kind: "Ok"; readonly running: boolean; readonly message: string }
  | { readonly kind: "NotReady"; readonly message: string }
  | { readonly kind: "NotFound" };

export interface ExecOptions {
  /**
   * The cell's own time limit: past it the cell is interrupted (and, if that does not stop
   * it, the kernel restarted) and answered ERROR "CellTimeout" with its output kept.
   * Absent: no limit of its own; the session's limits (lifetime, the job's) still apply.
   */
  readonly timeoutSeconds?: number;
  /**
   * At most this many characters of each output stream go to the client for this cell (first
   * and last halves; the whole output is kept in a file the truncation line names). Only
   * lowers the profile's cap: a larger value is the profile's.
   */
  readonly maxOutputChars?: number;
  /** The kernel running this cell is being restarted (an interrupt did not stop the cell). */
  readonly onKernel?: (message: string) => void;
  /**
   * Called once the cell was handed to the kernel (the session was found READY). A caller
   * that goes away changes nothing: the cell runs on, and its events stay in the API's cell
   * log for a client to re-attach.
   */
  readonly onStart?: () => void;
  /** Each output as the kernel produces it (the final execute_result/error included). */
  readonly onOutput?: (output: ExecOutput) => void;
}

export interface SessionService {
  /** Runs `code` in the READY session's kernel. Must not write lastActiveAt: the API does. */
  exec(workloadId: string, code: string, options?: ExecOptions): Promise<ExecOutcome>;
  /**
   * KeyboardInterrupt in the running cell; the kernel and its variables stay, unless the
   * cell has not stopped after the interrupt grace: then the kernel is restarted.
   */
  interrupt(workloadId: string): Promise<InterruptOutcome>;
  /** A fresh kernel in the same allocation: every variable gone, running cells answered. */
  restart(workloadId: string): Promise<RestartOutcome>;
}
