import type { Command } from "../../lib/command/command.ts";
import { CLIENT_OPTIONS_HELP, type ClientRuntime, systemRuntime } from "./client.ts";
import { createWorkloadActionCommand } from "./workload-action.ts";

const HELP = `Usage: openai4s interrupt ID

Interrupt the code running in session ID, as a notebook's interrupt button does: the
running cell gets a KeyboardInterrupt, and the kernel keeps its variables. Code that does
not stop within the daemon's interrupt grace (stuck in C, or catching KeyboardInterrupt)
costs the kernel: it is restarted, every variable is gone, and the cell's output says so.
Prints whether a cell was running. Exit status 1 when the session is not READY.

${CLIENT_OPTIONS_HELP}`;

export function createInterruptCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createWorkloadActionCommand<{ interrupted: boolean }>(runtime, {
    name: "interrupt",
    summary: "Interrupt the code running in a session",
    help: HELP,
    print: (body, io) => io.stdout(body.interrupted ? "interrupted\n" : "nothing was running\n"),
  });
}

export const interruptCommand = createInterruptCommand();
