/**
 * The worker's kernel: a persistent Python 3 interpreter (kernel.py) run as a child process,
 * talking newline-delimited JSON over its stdin and stdout. Cells run one at a time, in the
 * order they were asked for; state survives between them like a notebook's.
 *
 * If the interpreter dies (a segfault in an extension, `os._exit`, the OOM killer), the cell
 * it was running is answered ERROR and the next cell starts a fresh interpreter: a dead
 * kernel must cost one answer, not the worker.
 *
 * The interpreter gets its own process group, so closing the kernel also kills whatever the
 * user's code started; the worker closes it on every way out (stop, grace expiry, signals),
 * and the interpreter also exits by itself when its stdin closes, i.e. when the worker dies.
 */
import type { Subprocess } from "bun";
import * as v from "valibot";
import type { Log } from "../log.ts";
import kernelSource from "./kernel.py" with { type: "text" };

export interface KernelResult {
  readonly status: "OK" | "ERROR";
  readonly output: string;
  readonly stderr: string;
  readonly value: string | null;
  readonly error: string | null;
}

export interface Kernel {
  /** Runs `code` after every cell asked for before it. Never rejects. */
  exec(code: string): Promise<KernelResult>;
  /** Sends SIGINT to a running cell. False when no cell is running. */
  interrupt(): boolean;
  /** Starts the interpreter now, so the first cell does not pay for its start-up. */
  start(): void;
  /** Kills the interpreter and everything it started. Pending cells are answered ERROR. */
  close(): Promise<void>;
}

export interface KernelOptions {
  /** The Python 3 executable (default "python3", looked up on PATH). */
  readonly python?: string;
  readonly cwd?: string;
  /** Per field (stdout, stderr, value, traceback) kept of each cell (default 200 000). */
  readonly maxOutputChars?: number;
  readonly log: Log;
}

const ReplySchema = v.object({
  id: v.number(),
  status: v.picklist(["OK", "ERROR"]),
  output: v.string(),
  stderr: v.string(),
  value: v.nullable(v.string()),
  error: v.nullable(v.string()),
});

/** A reply line longer than this means the interpreter's protocol is broken. */
const MAX_REPLY_CHARS = 32 * 1024 * 1024;

type KernelProcess = Subprocess<"pipe", "pipe", "inherit">;

interface Running {
  readonly id: number;
  readonly proc: KernelProcess;
  readonly resolve: (result: KernelResult) => void;
}

export function failedResult(error: string): KernelResult {
  return { status: "ERROR", output: "", stderr: "", value: null, error };
}

export function createKernel(options: KernelOptions): Kernel {
  const python = options.python ?? "python3";
  const maxOutputChars = options.maxOutputChars ?? 200_000;
  const { log } = options;
  let proc: KernelProcess | null = null;
  let running: Running | null = null;
  let nextId = 1;
  let queue: Promise<unknown> = Promise.resolve();
  let closed = false;

  function kill(p: KernelProcess): void {
    try {
      process.kill(-p.pid, "SIGKILL");
    } catch {
      p.kill("SIGKILL"); // the group is gone already; make sure of the leader
    }
  }

  function spawn(): KernelProcess | string {
    if (proc) return proc;
    let p: KernelProcess;
    try {
      p = Bun.spawn([python, "-u", "-c", kernelSource, String(maxOutputChars)], {
        ...(options.cwd !== undefined && { cwd: options.cwd }),
        stdin: "pipe",
        stdout: "pipe",
        stderr: "inherit",
        detached: true,
      });
    } catch (error) {
      return `cannot start the Python kernel (${python}): ${String(error)}`;
    }
    proc = p;
    void readReplies(p);
    void p.exited.then(() => onExit(p));
    return p;
  }

  async function readReplies(p: KernelProcess): Promise<void> {
    const decoder = new TextDecoder();
    let parts: string[] = [];
    let partChars = 0;
    for await (const chunk of p.stdout) {
      const text = decoder.decode(chunk, { stream: true });
      let start = 0;
      let newline = text.indexOf("\n");
      while (newline >= 0) {
        parts.push(text.slice(start, newline));
        onReply(p, parts.join(""));
        parts = [];
        partChars = 0;
        start = newline + 1;
        newline = text.indexOf("\n", start);
      }
      if (start < text.length) {
        parts.push(text.slice(start));
        partChars += text.length - start;
      }
      if (partChars > MAX_REPLY_CHARS) {
        log.error("kernel: reply too long, killing the interpreter");
        kill(p);
        return;
      }
    }
  }

  function onReply(p: KernelProcess, line: string): void {
    let reply: v.InferOutput<typeof ReplySchema> | null = null;
    try {
      const parsed = v.safeParse(ReplySchema, JSON.parse(line));
      if (parsed.success) reply = parsed.output;
    } catch {
      // not JSON: handled below like any other broken reply
    }
    const cell = running;
    if (!reply || !cell || cell.proc !== p || reply.id !== cell.id) {
      // Something wrote into the protocol channel. Its state can no longer be trusted to
      // match our bookkeeping; a fresh interpreter is the only safe continuation.
      log.error("kernel: unexpected reply, killing the interpreter");
      kill(p);
      return;
    }
    running = null;
    const { id: _id, ...result } = reply;
    cell.resolve(result);
  }

  function onExit(p: KernelProcess): void {
    if (proc === p) proc = null;
    const how = p.signalCode ? `signal ${p.signalCode}` : `exit code ${p.exitCode}`;
    const cell = running;
    if (cell && cell.proc === p) {
      running = null;
      cell.resolve(
        failedResult(
          closed
            ? "the kernel was shut down"
            : `the Python kernel died (${how}) while running this code; its state is lost, and the next exec starts a fresh interpreter`,
        ),
      );
    } else if (!closed) {
      log.warn("kernel: the interpreter exited while idle; the next exec starts a fresh one", {
        how,
      });
    }
  }

  function runOne(code: string): Promise<KernelResult> {
    return new Promise((resolve) => {
      if (closed) return resolve(failedResult("the kernel was shut down"));
      const started = spawn();
      if (typeof started === "string") return resolve(failedResult(started));
      const id = nextId++;
      running = { id, proc: started, resolve };
      try {
        started.stdin.write(`${JSON.stringify({ id, code })}\n`);
        void started.stdin.flush();
      } catch (error) {
        log.error("kernel: cannot write to the interpreter", { error: String(error) });
        kill(started); // onExit answers this cell
      }
    });
  }

  return {
    exec(code) {
      const result = queue.then(() => runOne(code));
      queue = result;
      return result;
    },

    interrupt() {
      const cell = running;
      if (!cell) return false;
      try {
        process.kill(cell.proc.pid, "SIGINT");
        return true;
      } catch {
        return false;
      }
    },

    start() {
      if (closed) return;
      const started = spawn();
      if (typeof started === "string") log.error("kernel: start failed", { error: started });
    },

    async close() {
      closed = true;
      const p = proc;
      if (!p) return;
      kill(p);
      await p.exited;
    },
  };
}
