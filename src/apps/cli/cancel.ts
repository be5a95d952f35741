import type { Command } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  systemRuntime,
  type WorkloadBody,
} from "./client.ts";
import { createWorkloadActionCommand } from "./workload-action.ts";

const HELP = `Usage: openai4s cancel ID

Ask the daemon to stop workload ID. Idempotent: cancelling twice, or cancelling a
workload that already ended, succeeds. \`openai4s wait ID\` waits for the end.

${CLIENT_OPTIONS_HELP}`;

export function createCancelCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createWorkloadActionCommand<WorkloadBody>(runtime, {
    name: "cancel",
    summary: "Cancel a workload (idempotent)",
    help: HELP,
    print: (body, io) => io.stdout(`cancel requested: ${body.id} (now ${body.phase})\n`),
  });
}

export const cancelCommand = createCancelCommand();
