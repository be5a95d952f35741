/**
 * `openai4s __supervise --job-dir DIR`: the hidden mode the local backend starts (detached)
 * for each job. Not for humans; its output goes to DIR/supervisor.log.
 */
import { writeSync } from "node:fs";
import { isAbsolute } from "node:path";
import { systemTimers } from "../../lib/clock.ts";
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
    const log = jsonLog(bestEffortLogLine);
    return runSupervisor(dir, { now: Date.now, timers: systemTimers, bootId: readBootId(), log });
  },
};

/**
 * The supervisor's log line, written straight to its log file (fd 2) and dropped when it
 * cannot be: the command's stderr writer ends the process on a failed write, and on a full
 * state dir that killed the supervisor of a running array between two elements (issue 33),
 * its job's only witness, so the array's end was never recorded. A lost log line is the
 * lesser loss; the records themselves are kept (kept-records.ts).
 */
function bestEffortLogLine(line: string): void {
  try {
    writeSync(2, line);
  } catch {
    // ENOSPC or EIO on the log: the job's records matter more than this line.
  }
}
