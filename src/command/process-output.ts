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
 * the exit code so far, as before, not with a stack trace.
 */

export function stdoutWriter(): (text: string) => void {
  const onError = (error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === "EPIPE") readerGone();
    throw error;
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
        throw error;
      });
    }
    process.stderr.write(text);
  };
}

function readerGone(): never {
  process.exit(process.exitCode ?? 0);
}
