import type { Command } from "../../cli/command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const superviseCommand: Command = {
  name: "__supervise",
  summary: "Internal: the local backend's job supervisor",
  hidden: true,
  async run(_args, io) {
    io.stderr("openai4s __supervise: not implemented yet\n");
    return 1;
  },
};
