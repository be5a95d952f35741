import type { Command } from "../cli/command.ts";

// TRANSITIONAL: replaced by the issue that owns this command.
export const serveCommand: Command = {
  name: "serve",
  summary: "Run the daemon: admin API, reconciler and (opt-in) worker gateway",
  async run(_args, io) {
    io.stderr("openai4s serve: not implemented yet\n");
    return 1;
  },
};
