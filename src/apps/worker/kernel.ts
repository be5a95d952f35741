/**
 * The worker's kernel: a persistent Python 3 interpreter (kernel.py) run as a child process,
 * talking newline-delimited JSON over its stdin and stdout. Cells run one at a time, in the
 * order they were asked for; state survives between them like a notebook's. What a cell
 * prints and displays is passed on as it happens (`onEvent`), then the cell is answered.
 *
 * If the interpreter dies (a segfault in an extension, `os._exit`, the OOM killer), the cell
 * it was running is answered ERROR, `onStatus` reports the death at once (the process is
 * watched, not polled), a fresh interpreter starts at once (as Jupyter's autorestart does,
 * so a session waiting for READY does not wait for an exec that nobody sends), and the next
 * cell says its state is gone (`kernelRestarted`): a dead kernel must cost one answer and its
 * state, not the worker. A kernel that keeps dying is left dead after a few tries
 * (restart-budget.ts); the next exec tries again.
 *
 * An interrupt may escalate: a cell still running `restartAfterMs` after its SIGINT (stuck in
 * C, or catching KeyboardInterrupt) costs the interpreter, which is replaced; the cell hears
 * it (a `kernel` event, then a KernelRestarted error), and so do the cells queued behind it,
 * which never ran: their code was written against state that is gone.
 *
 * Output between cells (a thread a cell started prints on, a widget changes) is not lost: it
 * goes to `onIdleEvent` at once, named by the cell that ran last (Jupyter's parent), and the
 * streams and displays of it wait (bounded) for the next plain exec, which gets them first.
 * A Jupyter request drops that backlog: its client had them live. What the interpreter wrote
 * just before dying is read to the end before its death is reported.
 *
 * The interpreter gets its own process group, so closing the kernel also kills whatever the
 * user's code started; the worker closes it on every way out (stop, grace expiry, signals),
 * and the interpreter also exits by itself when its stdin closes, i.e. when the worker dies.
 *
 * Over 400 lines because one state machine over one interpreter (cells, interrupts held until a cell starts, escalation, restart, death); split it with its tests next.
 */
import type { Subprocess } from "bun";
import * as v from "valibot";
import { sleep, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import {
  type CellError,
  CellErrorSchema,
  type CellEvent,
  CellEventSchema,
  type KernelStatus,
  type MimeBundle,
  MimeBundleSchema,
} from "../../wire/worker-protocol.ts";
import kernelSource from "./kernel.py" with { type: "text" };
import { describeExit, oomKillCount } from "./kernel-exit.ts";
import { createIdleOutput } from "./kernel-idle.ts";
import kernelJupyterSource from "./kernel-jupyter.py" with { type: "text" };
import { type KernelEnvironment, kernelArgv } from "./kernel-launch.ts";
import { cellLine } from "./kernel-line.ts";
import { createRestartBudget, RESTART_BUDGET } from "./restart-budget.ts";

export interface KernelResult {
  readonly status: "OK" | "ERROR";
  /** The last expression's MIME bundle; null when there is none or it is None. */
  readonly result: MimeBundle | null;
  readonly error: CellError | null;
  /** This cell ran in a fresh interpreter because the previous one died: state was lost. */
  readonly kernelRestarted: boolean;
  /** The shell reply of a Jupyter request; null for a plain exec (or a kernel that failed). */
  readonly jupyter: JupyterReply | null;
}

export interface JupyterReply {
  readonly msgType: string;
  readonly content: Readonly<Record<string, unknown>>;
  /** A request's binary buffers (a comm message's), base64. */
  readonly buffers?: readonly string[];
}

export interface ExecOptions {
  /** What the cell prints and displays, as it happens, before the answer. */
  readonly onEvent?: (event: CellEvent) => void;
  /** A name for the cell, so `interrupt(cell)` cannot hit a different one. */
  readonly cell?: string;
  /** Run this Jupyter shell request instead of `code` (kernel-jupyter.py answers it). */
  readonly jupyter?: JupyterReply;
  /** This cell's per-stream output cap, when lower than the kernel's own (kernel.py). */
  readonly maxOutputChars?: number;
}

export type InterruptOutcome =
  /** The cell was running: it got SIGINT (KeyboardInterrupt). */
  | { readonly kind: "Interrupted" }
  /** The cell was still waiting for its turn: it was taken out of the queue, never ran. */
  | { readonly kind: "Dequeued" }
  /** No such cell is running or waiting (idle, or it finished already). */
  | { readonly kind: "NotRunning" };

export interface Kernel {
  /** Runs `code` after every cell asked for before it. Never rejects. */
  exec(code: string, options?: ExecOptions): Promise<KernelResult>;
  /**
   * Interrupts the running cell, or only the named cell (running or waiting). With
   * `restartAfterMs`, a cell that has not answered that long after the interrupt costs the
   * interpreter (see the top).
   */
  interrupt(cell?: string, restartAfterMs?: number): InterruptOutcome;
  /** A fresh interpreter in place of this one; the running and queued cells fail. */
  restart(why: string): Promise<KernelStatus>;
  /** Starts the interpreter now, so the first cell does not pay for its start-up. */
  start(): void;
  /** Hands `value` to the running cell's input(); false when no Jupyter cell is running. */
  input(value: string): boolean;
  /** The interpreter's state now. */
  status(): KernelStatus;
  /** Kills the interpreter and everything it started. Pending cells are answered ERROR. */
  close(): Promise<void>;
}

export interface KernelOptions {
  /** The Python 3 executable (default "python3", looked up on PATH). */
  readonly python?: string;
  /** The profile's environment the session chose: its prefix and module lines. */
  readonly environment?: KernelEnvironment;
  readonly cwd?: string;
  /** Per stream (stdout, stderr), value and traceback kept of each cell (default 200 000). */
  readonly maxOutputChars?: number;
  /** Per MIME value of a result or display (default 512 KiB of base64 or text). */
  readonly maxMimeChars?: number;
  readonly log: Log;
  /** Where the restart escalation waits (from the worker's entry point). */
  readonly timers: Timers;
  /** Every change of the interpreter's state: started, or died (with how). */
  readonly onStatus?: (status: KernelStatus) => void;
  /** Where the cgroup files are (tests); default "/". */
  readonly fsRoot?: string;
  /**
   * Output while no cell runs, as it happens, with the name of the cell that ran last
   * (undefined: none, or it had no name).
   */
  readonly onIdleEvent?: (event: CellEvent, cell: string | undefined) => void;
}

const LineSchema = v.union([
  v.object({ id: v.number(), event: CellEventSchema }),
  v.object({ idle: v.number(), event: CellEventSchema }),
  v.object({ id: v.number(), started: v.literal(true) }),
  v.object({
    id: v.number(),
    reply: v.object({
      status: v.picklist(["OK", "ERROR"]),
      result: v.nullable(MimeBundleSchema),
      error: v.nullable(CellErrorSchema),
      jupyter: v.optional(
        v.object({
          msgType: v.pipe(v.string(), v.maxLength(100)),
          content: v.record(v.string(), v.unknown()),
        }),
      ),
    }),
  }),
]);

/** A reply line longer than this means the interpreter's protocol is broken. */
const MAX_REPLY_CHARS = 32 * 1024 * 1024;
/**
 * After the interpreter exits, how long its last lines may take to be read before its death
 * is reported: a forked child that kept the pipe open must not hold the answer forever.
 */
const DRAIN_AFTER_EXIT_MS = 500;

type KernelProcess = Subprocess<"pipe", "pipe", "inherit">;

export interface Cell {
  readonly id: number;
  readonly code: string;
  readonly name: string | undefined;
  readonly jupyter: JupyterReply | undefined;
  readonly maxOutputChars: number | undefined;
  readonly onEvent: ((event: CellEvent) => void) | undefined;
  readonly resolve: (result: KernelResult) => void;
}

interface Running extends Cell {
  readonly proc: KernelProcess;
  readonly restarted: boolean;
  /** The interpreter said the cell began: from here a SIGINT interrupts it. */
  started: boolean;
  /** Interrupted before it began: the SIGINT goes out with its "started" line. */
  interruptHeld: boolean;
  /** The escalation of an interrupt, armed until the cell answers. */
  /** Cancels the armed escalation. */
  escalation: (() => void) | null;
}

function failedResult(ename: string, message: string, kernelRestarted = false): KernelResult {
  return {
    status: "ERROR",
    result: null,
    error: { ename, evalue: message, traceback: message },
    kernelRestarted,
    jupyter: null,
  };
}

/** A cell the kernel's restart cost its run: the traceback names the error, as Python's do. */
function restartedResult(message: string): KernelResult {
  return {
    status: "ERROR",
    result: null,
    error: { ename: "KernelRestarted", evalue: message, traceback: `KernelRestarted: ${message}` },
    kernelRestarted: false,
    jupyter: null,
  };
}

export function createKernel(options: KernelOptions): Kernel {
  const python = options.python ?? "python3";
  const maxOutputChars = options.maxOutputChars ?? 200_000;
  const maxMimeChars = options.maxMimeChars ?? 512 * 1024;
  const { log } = options;
  let proc: KernelProcess | null = null;
  let running: Running | null = null;
  const waiting: Cell[] = [];
  let nextId = 1;
  let closed = false;
  /** The previous interpreter died: the next one's first cell is told its state is gone. */
  let diedBefore = false;
  let freshAfterDeath = false;
  let oomKillsAtStart: number | null = null;
  let current: KernelStatus = { state: "stopped", message: "not started yet" };
  /** The interpreter killed on purpose (restart, escalation), and what its cells are told. */
  let replacing: { readonly proc: KernelProcess; readonly why: string } | null = null;
  /** How the previous interpreter ended, for the status of the one that replaces it. */
  let replaced: string | null = null;
  const budget = createRestartBudget();
  /** Each interpreter's end, handled (its last lines read, onExit run). */
  const handled = new WeakMap<KernelProcess, Promise<void>>();
  const idle = createIdleOutput({
    maxKeptChars: 2 * maxOutputChars + maxMimeChars,
    onIdleEvent: options.onIdleEvent,
    log,
  });

  function setStatus(status: KernelStatus): void {
    current = status;
    options.onStatus?.(status);
  }

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
      p = Bun.spawn(
        [
          ...kernelArgv(
            python,
            [
              "-u",
              "-c",
              kernelSource,
              String(maxOutputChars),
              String(maxMimeChars),
              kernelJupyterSource,
            ],
            options.environment,
          ),
        ],
        {
          ...(options.cwd !== undefined && { cwd: options.cwd }),
          stdin: "pipe",
          stdout: "pipe",
          stderr: "inherit",
          detached: true,
        },
      );
    } catch (error) {
      return `cannot start the Python kernel (${python}): ${String(error)}`;
    }
    proc = p;
    freshAfterDeath = diedBefore;
    diedBefore = false;
    oomKillsAtStart = oomKillCount(options.fsRoot ?? "/");
    const reading = readLines(p);
    handled.set(
      p,
      p.exited
        .then(() => Promise.race([reading, sleep(DRAIN_AFTER_EXIT_MS)]))
        .then(() => onExit(p)),
    );
    setStatus(
      replaced === null
        ? { state: "running", message: "the interpreter is running" }
        : {
            state: "running",
            message: `a fresh interpreter replaced the previous one (${replaced}); earlier state is lost`,
            replaced,
          },
    );
    return p;
  }

  async function readLines(p: KernelProcess): Promise<void> {
    const decoder = new TextDecoder();
    let parts: string[] = [];
    let partChars = 0;
    for await (const chunk of p.stdout) {
      const text = decoder.decode(chunk, { stream: true });
      let start = 0;
      let newline = text.indexOf("\n");
      while (newline >= 0) {
        parts.push(text.slice(start, newline));
        onLine(p, parts.join(""));
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

  function onLine(p: KernelProcess, line: string): void {
    let parsed: v.InferOutput<typeof LineSchema> | null = null;
    try {
      const result = v.safeParse(LineSchema, JSON.parse(line));
      if (result.success) parsed = result.output;
    } catch {
      // not JSON: handled below like any other broken line
    }
    if (parsed && "idle" in parsed) {
      if (proc === p) idle.received(parsed.event, parsed.idle);
      return;
    }
    const cell = running;
    if (!parsed || !cell || cell.proc !== p || parsed.id !== cell.id) {
      // Something wrote into the protocol channel. Its state can no longer be trusted to
      // match our bookkeeping; a fresh interpreter is the only safe continuation.
      log.error("kernel: unexpected line, killing the interpreter");
      kill(p);
      return;
    }
    if ("started" in parsed) {
      cell.started = true;
      if (cell.interruptHeld) signalInterrupt(cell);
      return;
    }
    if ("event" in parsed) {
      try {
        cell.onEvent?.(parsed.event);
      } catch (error) {
        log.error("kernel: event listener failed", { error: String(error) });
      }
      return;
    }
    running = null;
    cell.escalation?.();
    cell.resolve({
      status: parsed.reply.status,
      result: parsed.reply.result,
      error: parsed.reply.error,
      kernelRestarted: cell.restarted,
      jupyter: parsed.reply.jupyter ?? null,
    });
    pump();
  }

  function onExit(p: KernelProcess): void {
    if (proc === p) proc = null;
    const deliberate = replacing?.proc === p ? replacing : null;
    if (deliberate) replacing = null;
    const cell = running?.proc === p ? running : null;
    if (cell) {
      running = null;
      cell.escalation?.();
    }
    if (closed) {
      cell?.resolve(failedResult("KernelShutDown", "the kernel was shut down"));
      return;
    }
    if (deliberate) {
      replaced = deliberate.why;
      const lost = `${deliberate.why}: the kernel was restarted, and every variable is gone`;
      cell?.resolve(restartedResult(lost));
      failWaiting(`the kernel was restarted (${deliberate.why}) before this cell ran`);
      spawn();
      return;
    }
    const how = describeExit(p, oomKillsAtStart, oomKillCount(options.fsRoot ?? "/"));
    diedBefore = true;
    replaced = `the previous one died: ${how}`;
    const again = budget.allow(Date.now());
    setStatus({
      state: "dead",
      message: again
        ? `the Python kernel died (${how}); its state is lost, and a fresh interpreter is starting`
        : `the Python kernel died (${how}) ${RESTART_BUDGET.deaths} times within ${RESTART_BUDGET.windowMs / 1000} s; it is left dead, and the next exec starts a fresh interpreter`,
    });
    if (cell) {
      cell.resolve(
        failedResult(
          "KernelDied",
          `the Python kernel died (${how}) while running this code; its state is lost, and the next cell runs in a fresh interpreter`,
        ),
      );
    } else {
      log.warn("kernel: the interpreter exited while idle", { how, restarting: again });
    }
    if (again) spawn();
    pump();
  }

  /** Kills `p` on purpose: its exit starts the next interpreter (see onExit). */
  function replace(p: KernelProcess, why: string, cell: Running | null): void {
    if (replacing !== null) return;
    replacing = { proc: p, why };
    try {
      cell?.onEvent?.({
        type: "kernel",
        state: "restarting",
        message: `${why}: restarting the kernel; every variable is lost`,
      });
    } catch (error) {
      log.error("kernel: event listener failed", { error: String(error) });
    }
    kill(p);
  }

  function failWaiting(message: string): void {
    for (const cell of waiting.splice(0)) {
      cell.resolve(restartedResult(`${message}; nothing of it ran`));
    }
  }

  function signalInterrupt(cell: Running): boolean {
    try {
      process.kill(cell.proc.pid, "SIGINT");
      return true;
    } catch {
      return false; // the interpreter is gone; its exit answers the cell
    }
  }

  /** Starts the next waiting cell when none is running. */
  function pump(): void {
    if (running) return;
    const cell = waiting.shift();
    if (!cell) return;
    if (closed) {
      cell.resolve(failedResult("KernelShutDown", "the kernel was shut down"));
      pump();
      return;
    }
    const started = spawn();
    if (typeof started === "string") {
      cell.resolve(failedResult("KernelStartFailed", started));
      pump();
      return;
    }
    const restarted = freshAfterDeath;
    freshAfterDeath = false;
    idle.started(cell.id, cell.name);
    const waited = idle.take();
    if (cell.jupyter === undefined) {
      for (const event of waited) {
        try {
          cell.onEvent?.(event);
        } catch (error) {
          log.error("kernel: event listener failed", { error: String(error) });
        }
      }
    }
    running = {
      ...cell,
      proc: started,
      restarted,
      started: false,
      interruptHeld: false,
      escalation: null,
    };
    try {
      started.stdin.write(`${JSON.stringify(cellLine(cell))}\n`);
      void started.stdin.flush();
    } catch (error) {
      log.error("kernel: cannot write to the interpreter", { error: String(error) });
      kill(started); // onExit answers this cell
    }
  }

  return {
    exec(code, execOptions = {}) {
      return new Promise((resolve) => {
        waiting.push({
          id: nextId++,
          code,
          name: execOptions.cell,
          jupyter: execOptions.jupyter,
          maxOutputChars: execOptions.maxOutputChars,
          onEvent: execOptions.onEvent,
          resolve,
        });
        pump();
      });
    },

    interrupt(cell, restartAfterMs) {
      const target = running;
      if (target && (cell === undefined || target.name === cell)) {
        // Before its "started" line the interpreter ignores SIGINT (it is reading, parsing
        // or compiling the cell): sent now, the interrupt would be answered yet lost.
        if (!target.started) target.interruptHeld = true;
        else if (!signalInterrupt(target)) return { kind: "NotRunning" };
        if (restartAfterMs !== undefined && target.escalation === null) {
          target.escalation = options.timers.after(restartAfterMs, () => {
            if (running !== target) return;
            const why = `the cell did not stop within ${seconds(restartAfterMs)} of its interrupt`;
            replace(target.proc, why, target);
          });
        }
        return { kind: "Interrupted" };
      }
      if (cell === undefined) return { kind: "NotRunning" };
      const index = waiting.findIndex((c) => c.name === cell);
      if (index < 0) return { kind: "NotRunning" };
      const [dequeued] = waiting.splice(index, 1);
      dequeued?.resolve(
        failedResult("KeyboardInterrupt", "KeyboardInterrupt: interrupted before it started"),
      );
      return { kind: "Dequeued" };
    },

    async restart(why) {
      if (closed) return current;
      const p = proc;
      if (p) {
        replace(p, why, running?.proc === p ? running : null);
        await handled.get(p); // its exit (onExit) started the fresh one
        return current;
      }
      // Dead and left dead, or never started: nothing to kill.
      replaced = why;
      diedBefore = false;
      failWaiting(`the kernel was restarted (${why}) before this cell ran`);
      const started = spawn();
      if (typeof started === "string") {
        setStatus({ state: "dead", message: started.slice(0, 1000) });
      }
      return current;
    },

    start() {
      if (closed) return;
      const started = spawn();
      if (typeof started === "string") log.error("kernel: start failed", { error: started });
    },

    status: () => current,

    input(value) {
      const target = running;
      if (!target || target.jupyter === undefined) return false;
      try {
        target.proc.stdin.write(`${JSON.stringify({ input_reply: value })}\n`);
        void target.proc.stdin.flush();
        return true;
      } catch {
        return false;
      }
    },

    async close() {
      closed = true;
      for (const cell of waiting.splice(0)) {
        cell.resolve(failedResult("KernelShutDown", "the kernel was shut down"));
      }
      const p = proc;
      if (!p) return;
      kill(p);
      await p.exited;
    },
  };
}

/** "10 s", "0.5 s". */
function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}
