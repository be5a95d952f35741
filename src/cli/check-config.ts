import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const checkConfigCommand: Command = {
  name: "check-config",
  summary: "Validate a cluster.toml and print its profiles",
  async run(_args, io) {
    io.stderr("openai4s check-config: not implemented yet\n");
    return 1;
  },
};
