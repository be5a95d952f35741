import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const cancelCommand: Command = {
  name: "cancel",
  summary: "Cancel a workload (idempotent)",
  async run(_args, io) {
    io.stderr("openai4s cancel: not implemented yet\n");
    return 1;
  },
};
