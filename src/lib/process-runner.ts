/**
 * Runs one program as an argv array (never through a shell), with a timeout that kills the
 * whole process group and output drained under a byte cap. A leaf: it imports nothing from
 * the project, so every room that starts a program (a backend's client commands, a step in
 * an allocation, the isolation probe) can use it.
 *
 * Why each guard exists (measured on Bun 1.4.5):
 * - `Bun.spawn`'s own `timeout` kills only the direct child; a grandchild keeps the pipes open
 *   and the read blocks for ever. The child is spawned detached (its own process group) and
 *   the group is killed.
 * - `maxBuffer` does not cap what is read: the cap is enforced here, chunk by chunk.
 * - A program missing from PATH is an answer of its own ("not found"), resolved up front
 *   against the PATH the child will get, so it can never be mistaken for an empty listing.
 */

export interface ProcessRequest {
  /** A bare program name (resolved against `searchPath`, else env.PATH) or an absolute path. */
  readonly program: string;
  /**
   * Where a bare program name is looked up when that is not the child's own PATH: a submit
   * command may run with the JOB's environment (its PATH is the job's), yet be found where
   * the resource manager's commands live.
   */
  readonly searchPath?: string;
  readonly args: readonly string[];
  /** The child's whole environment: nothing of the daemon's is inherited. */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  readonly timeoutMs: number;
  /** Per stream (stdout and stderr each). */
  readonly maxOutputBytes: number;
  /**
   * "fail": output beyond the cap ends the process and the answer is void, because a cut
   * listing reads as jobs that are missing. "truncate": keep the first bytes, drain the rest
   * without storing it, and let the process run on (a task must not be killed by its own
   * chattiness).
   */
  readonly overflow: "fail" | "truncate";
  /** Between SIGTERM and SIGKILL of the group on timeout; 0 sends SIGKILL at once. */
  readonly killGraceMs: number;
  /**
   * Kill what is left of the group once the program itself has exited: a step that leaves a
   * child behind would otherwise hold the pipes open until the timeout. Off by default:
   * once the leader is reaped an empty group's id is free again.
   */
  readonly killGroupAfterExit?: boolean;
}

export type ProcessOutcome =
  | {
      readonly kind: "Exited";
      /** null when a signal ended it. */
      readonly exitCode: number | null;
      readonly signal: string | null;
      readonly stdout: string;
      readonly stderr: string;
      /** Only with overflow "truncate": the streams some output of which was dropped. */
      readonly truncated: readonly ("stdout" | "stderr")[];
      readonly durationMs: number;
    }
  | {
      readonly kind: "TimedOut";
      readonly stdout: string;
      readonly stderr: string;
      readonly durationMs: number;
    }
  | { readonly kind: "Overflowed"; readonly durationMs: number }
  | { readonly kind: "NotFound"; readonly message: string };

export interface ProgramRunner {
  run(request: ProcessRequest): Promise<ProcessOutcome>;
}

/** After the group was killed, how long to wait for the pipes to close before giving up. */
const ABANDON_AFTER_KILL_MS = 2_000;

interface Drained {
  readonly text: string;
  readonly overflowed: boolean;
}

async function drain(
  stream: ReadableStream<Uint8Array>,
  cap: number,
  onOverflow: () => void,
  register: (cancel: () => void) => void,
): Promise<Drained> {
  const reader = stream.getReader();
  register(() => {
    reader.cancel().catch(() => {});
  });
  const chunks: Uint8Array[] = [];
  let kept = 0;
  let overflowed = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (kept < cap) {
        const take = Math.min(value.byteLength, cap - kept);
        chunks.push(value.subarray(0, take));
        kept += take;
        if (take < value.byteLength) overflowed = true;
      } else {
        overflowed = true;
      }
      if (overflowed) onOverflow();
    }
  } catch {
    // Cancelled after a kill: what was read so far is all there is.
  }
  const bytes = new Uint8Array(kept);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { text: new TextDecoder().decode(bytes), overflowed };
}

export function createProgramRunner(): ProgramRunner {
  return {
    async run(request) {
      const path = request.program.startsWith("/")
        ? request.program
        : Bun.which(request.program, { PATH: request.searchPath ?? request.env["PATH"] ?? "" });
      if (path === null) {
        return { kind: "NotFound", message: `${request.program}: no such command on PATH` };
      }
      const started = performance.now();
      let child: ReturnType<typeof Bun.spawn<"ignore", "pipe", "pipe">>;
      try {
        child = Bun.spawn({
          cmd: [path, ...request.args],
          env: { ...request.env },
          ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
          stdin: "ignore",
          stdout: "pipe",
          stderr: "pipe",
          detached: true,
        });
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (code === "ENOENT" || code === "EACCES" || code === "ENOTDIR") {
          return { kind: "NotFound", message: `${request.program}: ${String(code)}` };
        }
        throw error;
      }
      const pid = child.pid;
      const killGroup = (signal: NodeJS.Signals) => {
        try {
          process.kill(-pid, signal);
        } catch {
          // ESRCH: the group is already gone.
        }
      };
      const cancels: (() => void)[] = [];
      const timers: ReturnType<typeof setTimeout>[] = [];
      let timedOut = false;
      let overflowed = false;
      const abandonLater = () => {
        timers.push(
          setTimeout(() => {
            for (const cancel of cancels) cancel();
          }, request.killGraceMs + ABANDON_AFTER_KILL_MS),
        );
      };
      timers.push(
        setTimeout(() => {
          timedOut = true;
          if (request.killGraceMs > 0) {
            killGroup("SIGTERM");
            timers.push(setTimeout(() => killGroup("SIGKILL"), request.killGraceMs));
          } else {
            killGroup("SIGKILL");
          }
          abandonLater();
        }, request.timeoutMs),
      );
      const onOverflow = () => {
        if (request.overflow !== "fail" || overflowed) return;
        overflowed = true;
        killGroup("SIGKILL");
        abandonLater();
      };
      const register = (cancel: () => void) => {
        cancels.push(cancel);
      };
      try {
        const drained = Promise.all([
          drain(child.stdout, request.maxOutputBytes, onOverflow, register),
          drain(child.stderr, request.maxOutputBytes, onOverflow, register),
        ]);
        await child.exited;
        if (request.killGroupAfterExit === true) killGroup("SIGKILL");
        const [stdout, stderr] = await drained;
        const durationMs = performance.now() - started;
        if (overflowed) return { kind: "Overflowed", durationMs };
        if (timedOut) {
          return { kind: "TimedOut", stdout: stdout.text, stderr: stderr.text, durationMs };
        }
        return {
          kind: "Exited",
          exitCode: child.signalCode === null ? child.exitCode : null,
          signal: child.signalCode === null ? null : String(child.signalCode),
          stdout: stdout.text,
          stderr: stderr.text,
          truncated: [
            ...(stdout.overflowed ? (["stdout"] as const) : []),
            ...(stderr.overflowed ? (["stderr"] as const) : []),
          ],
          durationMs,
        };
      } finally {
        // No group kill after a normal exit (unless asked): once the leader is reaped its
        // group id is free and may already name someone else's processes.
        for (const timer of timers) clearTimeout(timer);
      }
    },
  };
}
