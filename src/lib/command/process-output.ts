/**
 * Where a command's output goes, at the least start-up cost. `process.stdout` and
 * `process.stderr` are Node streams Bun builds on first use (about 7 ms, measured in the
 * compiled binary), and importing `node:fs` for a plain write costs another millisecond:
 * together most of what `openai4s --version`, or a `wait` in a script's loop, took beyond
 * the runtime itself (bench/startup.bench.ts). So stdout goes through `console.write` (Bun's
 * own buffered writer, what `console.log` uses: ordered, flushed before the process exits),
 * and stderr through the stream, built only when something is written there.
 *
 * A reader that went away (EPIPE: `openai4s list | head -1`) ends the process quietly with
 * the exit code so far, as before, not with a stack trace; any other write failure is lost
 * output and exits 1.
 */

export function stdoutWriter(): (text: string) => void {
  const onError = (error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === "EPIPE") readerGone();
    outputLost(error, true);
  };
  return (text) => {
    let written: number | Promise<number>;
    try {
      written = console.write(text);
    } catch (error) {
      onError(error);
      return;
    }
    // A backed-up pipe: the rest is buffered in order; only its failure is ours to handle.
    if (typeof written !== "number") written.catch(onError);
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
