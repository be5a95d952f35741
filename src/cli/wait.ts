import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const waitCommand: Command = {
  name: "wait",
  summary: "Wait until a workload is READY or terminal",
  async run(_args, io) {
    io.stderr("openai4s wait: not implemented yet\n");
    return 1;
  },
};
