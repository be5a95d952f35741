/**
 * `openai4s __supervise --job-dir DIR`: the hidden mode the local backend starts (detached)
 * for each job. Not for humans; its output goes to DIR/supervisor.log.
 */
import { isAbsolute } from "node:path";
import { type Command, UsageError } from "../../lib/command/command.ts";
import { jsonLog } from "../../lib/log.ts";
import { readBootId } from "./proc.ts";
import { runSupervisor } from "./supervisor.ts";

const HELP = `Usage: openai4s __supervise --job-dir DIR

Internal: runs the local backend's job recorded in DIR as its own process group, enforces its
time limit, honours cancel requests, and records its exit durably in DIR/exit.json.
`;

export const superviseCommand: Command = {
  name: "__supervise",
  summary: "Internal: the local backend's job supervisor",
  hidden: true,
  async run(args, io) {
    if (args.includes("--help") || args.includes("-h")) {
      io.stdout(HELP);
      return 0;
    }
    if (args.length !== 2 || args[0] !== "--job-dir" || args[1] === undefined) {
      throw new UsageError("__supervise takes exactly --job-dir DIR");
    }
    const dir = args[1];
    if (!isAbsolute(dir)) throw new UsageError("--job-dir must be an absolute path");
    const log = jsonLog(io.stderr);
    return runSupervisor(dir, { now: Date.now, bootId: readBootId(), log });
  },
};
