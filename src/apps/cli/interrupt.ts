import type { Command } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  oneId,
  printJson,
  reportFailure,
  systemRuntime,
} from "./client.ts";

const HELP = `Usage: openai4s interrupt ID

Interrupt the code running in session ID, as a notebook's interrupt button does: the
running cell gets a KeyboardInterrupt, and the kernel keeps its variables. Code that does
not stop within the daemon's interrupt grace (stuck in C, or catching KeyboardInterrupt)
costs the kernel: it is restarted, every variable is gone, and the cell's output says so.
Prints whether a cell was running. Exit status 1 when the session is not READY.

${CLIENT_OPTIONS_HELP}`;

export function createInterruptCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "interrupt",
    summary: "Interrupt the code running in a session",
    help: HELP,
    options: {},
    async run({ positionals, io, json, connect }) {
      const id = oneId("interrupt", positionals);
      const result = await connect().request<{ interrupted: boolean }>(
        "POST",
        `/v1/workloads/${encodeId(id)}/interrupt`,
      );
      if (result.kind !== "Ok") return reportFailure("interrupt", result, io, json);
      if (json) printJson(io, result.body);
      else io.stdout(result.body.interrupted ? "interrupted\n" : "nothing was running\n");
      return 0;
    },
  });
}

export const interruptCommand = createInterruptCommand();
