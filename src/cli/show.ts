import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const showCommand: Command = {
  name: "show",
  summary: "Show one workload with its conditions and allocations",
  async run(_args, io) {
    io.stderr("openai4s show: not implemented yet\n");
    return 1;
  },
};
