import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const listCommand: Command = {
  name: "list",
  summary: "List workloads",
  async run(_args, io) {
    io.stderr("openai4s list: not implemented yet\n");
    return 1;
  },
};
