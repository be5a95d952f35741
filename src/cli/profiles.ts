import type { Command } from "./command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const profilesCommand: Command = {
  name: "profiles",
  summary: "List the profiles the daemon's backend offers",
  async run(_args, io) {
    io.stderr("openai4s profiles: not implemented yet\n");
    return 1;
  },
};
