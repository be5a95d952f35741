import type { Command } from "../../lib/command/command.ts";
import { CLIENT_OPTIONS_HELP, type ClientRuntime, systemRuntime } from "./client.ts";
import { createWorkloadActionCommand } from "./workload-action.ts";

const HELP = `Usage: openai4s restart ID

Restart the kernel of session ID, as a notebook's "Restart kernel" does: a fresh Python
interpreter in the same allocation (same resources, same workspace), every variable and
import gone. A cell that was running, and cells waiting behind it, are answered with a
KernelRestarted error. Prints the kernel's state. Exit status 1 when the session is not
READY or the fresh kernel could not start.

${CLIENT_OPTIONS_HELP}`;

export function createRestartCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createWorkloadActionCommand<{ running: boolean; message: string }>(runtime, {
    name: "restart",
    summary: "Restart a session's kernel",
    help: HELP,
    print: (body, io) => {
      if (body.running) io.stdout("restarted: a fresh kernel is running\n");
      else io.stderr(`openai4s restart: ${body.message}\n`);
    },
    // Not READY, or the fresh kernel could not start.
    status: (body) => (body.running ? 0 : 1),
  });
}

export const restartCommand = createRestartCommand();
