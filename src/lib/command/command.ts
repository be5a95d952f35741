import { stderrWriter, stdoutWriter } from "./process-output.ts";

/** A subcommand: its one-line summary for `openai4s --help`, and its entry point. */
export interface Command {
  readonly name: string;
  readonly summary: string;
  /** Hidden commands are internal modes of the binary (e.g. the local job supervisor). */
  readonly hidden?: boolean;
  /** Returns the process exit code: 0 success, 1 operation failed, 2 usage/config error. */
  run(args: readonly string[], io: CommandIo): Promise<number>;
}

export interface CommandIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The process's own output (process-output.ts: nothing built or imported until it is used). */
export const processIo: CommandIo = {
  stdout: stdoutWriter(),
  stderr: stderrWriter(),
  env: process.env,
};

/** A usage error: printed with a pointer to --help, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/**
 * The daemon's answer stopped mid-way (it was killed, restarted, or a proxy dropped the
 * connection): printed as one line, exit code 1, never as a runtime crash with a source
 * listing that reads like a bug in the client.
 */
export class ConnectionLost extends Error {
  override readonly name = "ConnectionLost";
}
