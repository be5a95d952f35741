/**
 * What the API needs from the sessions engine, and nothing more. The daemon injects an
 * implementation when sessions are enabled; without one, exec answers 409 instead of
 * pretending. Outcomes are a union so a handler cannot forget "not ready" or "no such
 * session" (each maps to its own status).
 */

export type ExecOutcome =
  /** The kernel ran the code. `status: "ERROR"` is the code's failure, not the daemon's. */
  | {
      readonly kind: "Ok";
      readonly status: "OK" | "ERROR";
      readonly output: string;
      readonly error: string | null;
    }
  /** The session exists but is not READY (message names the missing condition). */
  | { readonly kind: "NotReady"; readonly message: string }
  /** The sessions engine does not know this workload as a session. */
  | { readonly kind: "NotFound" };

export interface SessionService {
  /** Runs `code` in the READY session's kernel. Must not write lastActiveAt: the API does. */
  exec(workloadId: string, code: string): Promise<ExecOutcome>;
}
