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
  type WorkloadBody,
} from "./client.ts";

const HELP = `Usage: openai4s cancel ID

Ask the daemon to stop workload ID. Idempotent: cancelling twice, or cancelling a
workload that already ended, succeeds. \`openai4s wait ID\` waits for the end.

${CLIENT_OPTIONS_HELP}`;

export function createCancelCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "cancel",
    summary: "Cancel a workload (idempotent)",
    help: HELP,
    options: {},
    async run({ positionals, io, json, connect }) {
      const id = oneId("cancel", positionals);
      const client = connect();
      const result = await client.request<WorkloadBody>(
        "POST",
        `/v1/workloads/${encodeId(id)}/cancel`,
      );
      if (result.kind !== "Ok") return reportFailure("cancel", result, io, json);
      if (json) printJson(io, result.body);
      else io.stdout(`cancel requested: ${result.body.id} (now ${result.body.phase})\n`);
      return 0;
    },
  });
}

export const cancelCommand = createCancelCommand();
