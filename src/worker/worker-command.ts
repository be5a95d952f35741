import type { Command } from "../cli/command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const workerCommand: Command = {
  name: "worker",
  summary: "The worker role (what `openai4s-worker` runs)",
  hidden: true,
  async run(_args, io) {
    io.stderr("openai4s worker: not implemented yet\n");
    return 1;
  },
};
