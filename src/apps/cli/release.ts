import type { Command } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  systemRuntime,
  type WorkloadBody,
} from "./client.ts";
import { createWorkloadActionCommand } from "./workload-action.ts";

const HELP = `Usage: openai4s release ID

Let workload ID, submitted with --hold, run: upload its input first
(\`openai4s cp FILE ID:PATH\`), then release it. Idempotent: releasing one that is not
held succeeds and changes nothing.

${CLIENT_OPTIONS_HELP}`;

export function createReleaseCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createWorkloadActionCommand<WorkloadBody>(runtime, {
    name: "release",
    summary: "Let a held workload run",
    help: HELP,
    print: (body, io) => io.stdout(`released: ${body.id} (now ${body.phase})\n`),
  });
}

export const releaseCommand = createReleaseCommand();
