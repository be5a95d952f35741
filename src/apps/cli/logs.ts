import type { Command } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  oneId,
  reportFailure,
  systemRuntime,
} from "./client.ts";
import { parseIntegerFlag } from "./numbers.ts";

const HELP = `Usage: openai4s logs ID [--stderr] [--tail N] [--follow] [--attempt N] [--index K]

Print a workload's output: what its job wrote to stdout (or stderr), for its latest attempt
unless --attempt says which.

Options:
  --stderr       The job's stderr instead of its stdout.
  --tail N       Only the last N lines (0 with --follow: only what is written from now on).
  -f, --follow   Keep printing as the job writes, until its attempt ends; waits for the
                 attempt to start when it has not yet.
  --attempt N    Attempt N (1 is the first; see the EPOCH column of \`openai4s show\`).
  --index K      Element K of a job array (0 is the first); required for an array, each
                 element having its own log.
${CLIENT_OPTIONS_HELP}
A missing log (the job has not started, or the ID is wrong) is exit 1 with the reason.
`;

export function createLogsCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "logs",
    summary: "Print a workload's output (stdout or stderr)",
    help: HELP,
    options: {
      stderr: { type: "boolean" },
      tail: { type: "string" },
      follow: { type: "boolean", short: "f" },
      attempt: { type: "string" },
      index: { type: "string" },
    },
    async run({ values, positionals, io, json, connect }) {
      const id = oneId("logs", positionals);
      const query = new URLSearchParams();
      if (values.stderr) query.set("stream", "stderr");
      const tail = parseIntegerFlag("logs", "--tail", values.tail, { min: 0, max: 1_000_000 });
      if (tail !== undefined) query.set("tail", String(tail));
      if (values.follow) query.set("follow", "true");
      const attempt = parseIntegerFlag("logs", "--attempt", values.attempt, {
        min: 1,
        max: 1_000_000,
      });
      if (attempt !== undefined) query.set("attempt", String(attempt));
      const index = parseIntegerFlag("logs", "--index", values.index, { min: 0, max: 4_000_000 });
      if (index !== undefined) query.set("index", String(index));
      const suffix = query.size > 0 ? `?${query}` : "";
      const result = await (await connect()).stream(`/v1/workloads/${encodeId(id)}/logs${suffix}`);
      if (result.kind !== "Ok") return reportFailure("logs", result, io, json);
      // Decoded as it arrives; `stream: true` keeps a character split across chunks whole.
      const decoder = new TextDecoder();
      for await (const chunk of result.body) io.stdout(decoder.decode(chunk, { stream: true }));
      const rest = decoder.decode();
      if (rest !== "") io.stdout(rest);
      return 0;
    },
  });
}

export const logsCommand = createLogsCommand();
