/**
 * Every subcommand of the binary. Each lives in its own module; this list is the only place
 * that knows them all (and the source of `openai4s --help`).
 */

import type { Command } from "../command/command.ts";
import { superviseCommand } from "../composition/index.ts";
import { restoreCommand } from "../daemon/restore-command.ts";
import { serveCommand } from "../daemon/serve-command.ts";
import { workerCommand } from "../worker/worker-command.ts";
import { backupCommand } from "./backup.ts";
import { cancelCommand } from "./cancel.ts";
import { checkConfigCommand } from "./check-config.ts";
import { execCommand } from "./exec.ts";
import { interruptCommand } from "./interrupt.ts";
import { listCommand } from "./list.ts";
import { logsCommand } from "./logs.ts";
import { profilesCommand } from "./profiles.ts";
import { sessionCommand } from "./session.ts";
import { showCommand } from "./show.ts";
import { submitCommand } from "./submit.ts";
import { waitCommand } from "./wait.ts";

export const COMMANDS: readonly Command[] = [
  serveCommand,
  submitCommand,
  sessionCommand,
  execCommand,
  interruptCommand,
  listCommand,
  showCommand,
  logsCommand,
  cancelCommand,
  waitCommand,
  profilesCommand,
  checkConfigCommand,
  backupCommand,
  restoreCommand,
  workerCommand,
  superviseCommand,
];
