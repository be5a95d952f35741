import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const submitCommand: Command = {
  name: "submit",
  summary: "Submit a BATCH workload",
  async run(_args, io) {
    io.stderr("openai4s submit: not implemented yet\n");
    return 1;
  },
};
