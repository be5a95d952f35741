import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const sessionCommand: Command = {
  name: "session",
  summary: "Start an interactive SESSION (`session start`)",
  async run(_args, io) {
    io.stderr("openai4s session: not implemented yet\n");
    return 1;
  },
};
