import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  printJson,
  reportFailure,
  systemRuntime,
} from "./client.ts";
import { type Command, UsageError } from "./command.ts";

const HELP = `Usage: openai4s exec ID CODE

Run CODE in the kernel of READY session ID and print its output. Counts as activity,
so it keeps the session from being reclaimed as idle.
Exit status 1 when the code raised an error (printed on stderr) or the session is not READY.

${CLIENT_OPTIONS_HELP}`;

interface ExecBody {
  readonly status: "OK" | "ERROR";
  readonly output: string;
  readonly error: string | null;
}

export function createExecCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "exec",
    summary: "Run code in a READY session's kernel",
    help: HELP,
    options: {},
    async run({ positionals, io, json, connect }) {
      if (positionals.length !== 2) {
        throw new UsageError("exec: expected exactly two arguments: ID CODE");
      }
      const [id, code] = positionals as [string, string];
      const client = connect();
      const result = await client.request<ExecBody>("POST", `/v1/workloads/${encodeId(id)}/exec`, {
        body: { code },
      });
      if (result.kind !== "Ok") return reportFailure("exec", result, io, json);
      if (json) {
        printJson(io, result.body);
      } else {
        // The last expression's value comes without a newline (`x + 1` → "42"); printed
        // as is it would run into the shell prompt.
        const output = result.body.output;
        io.stdout(output === "" || output.endsWith("\n") ? output : `${output}\n`);
        if (result.body.error) io.stderr(`${result.body.error.replace(/\n?$/, "\n")}`);
      }
      return result.body.status === "OK" ? 0 : 1;
    },
  });
}

export const execCommand = createExecCommand();
