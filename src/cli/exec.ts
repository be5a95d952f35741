import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const execCommand: Command = {
  name: "exec",
  summary: "Run code in a READY session's kernel",
  async run(_args, io) {
    io.stderr("openai4s exec: not implemented yet\n");
    return 1;
  },
};
