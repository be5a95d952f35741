/**
 * Where a command's output goes, at the least start-up cost. `process.stdout` and
 * `process.stderr` are Node streams Bun builds on first use (about 7 ms, measured in the
 * compiled binary), and importing `node:fs` for a plain write costs another millisecond:
 * together most of what `openai4s --version`, or a `wait` in a script's loop, took beyond
 * the runtime itself (bench/startup.bench.ts). So stdout goes through `Bun.write` to
 * `Bun.stdout`, and stderr through the stream, built only when something is written there.
 * `console.write` (Bun's buffered writer) costs 1.1 ms on its first call into a pipe,
 * against 0.35 ms for `Bun.write` (issue 34); `console.log` less still, but it drops a
 * failed write without a word (`> /dev/full` exited 0).
 *
 * A reader that went away (EPIPE: `openai4s list | head -1`) ends the process quietly with
 * the exit code so far, as before, not with a stack trace; any other write failure is lost
 * output and exits 1.
 */

/**
 * Writes in order: while one write is in flight (a pipe whose reader is slow), what comes
 * next waits and goes out with the rest in one write when it completes. The pending write
 * keeps the process alive, so what a command printed is out before it exits.
 */
export function stdoutWriter(
  write: (text: string) => Promise<number> = (text) => Bun.write(Bun.stdout, text),
): (text: string) => void {
  const onError = (error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === "EPIPE") readerGone();
    outputLost(error, true);
  };
  let waiting: string[] | null = null;
  const start = (text: string) => {
    waiting = [];
    let written: Promise<number>;
    try {
      written = write(text);
    } catch (error) {
      onError(error);
      return;
    }
    written.then(() => {
      const next = (waiting ?? []).join("");
      waiting = null;
      if (next !== "") start(next);
    }, onError);
  };
  return (text) => {
    if (waiting !== null) waiting.push(text);
    else start(text);
  };
}

export function stderrWriter(): (text: string) => void {
  let guarded = false;
  return (text) => {
    if (!guarded) {
      guarded = true;
      process.stderr.on("error", (error: NodeJS.ErrnoException) => {
        if (error.code === "EPIPE") readerGone();
        outputLost(error, false);
      });
    }
    process.stderr.write(text);
  };
}

/**
 * Output that could not be written (a full disk, an I/O error) is lost: exit 1 with one line,
 * not a stack trace with a source listing, and never 0.
 */
function outputLost(error: unknown, sayOnStderr: boolean): never {
  if (sayOnStderr) {
    try {
      process.stderr.write(`openai4s: cannot write the output: ${(error as Error).message}\n`);
    } catch {
      // stderr is gone too: the exit status still says it.
    }
  }
  process.exit(1);
}

function readerGone(): never {
  process.exit(process.exitCode ?? 0);
}
