/**
 * A stand-in for the process runner that starts nothing: every request is written down and
 * answered as a successful exit with the stdout `stdout` gives for it, so a test reads the
 * argv the broker built and feeds it whatever listing it needs.
 */
import type {
  ProcessOutcome,
  ProcessRequest,
  ProgramRunner,
} from "../../src/lib/process-runner.ts";

export interface RecordedCall {
  readonly program: string;
  readonly args: readonly string[];
}

export function recordingRunner(stdout: (request: ProcessRequest) => string): {
  readonly runner: ProgramRunner;
  readonly calls: RecordedCall[];
} {
  const calls: RecordedCall[] = [];
  const runner: ProgramRunner = {
    async run(request): Promise<ProcessOutcome> {
      calls.push({ program: request.program, args: request.args });
      return {
        kind: "Exited",
        exitCode: 0,
        signal: null,
        stdout: stdout(request),
        stderr: "",
        truncated: [],
        durationMs: 0,
      };
    },
  };
  return { runner, calls };
}
