/**
 * `openai4s serve`: its configuration from flags and environment, parsed once (config.ts),
 * starts the daemon, and turns SIGTERM/SIGINT into a graceful stop.
 */

import { homedir } from "node:os";
import { systemAccounts } from "../../adapters/accounts-nss/getent-accounts.ts";
import { systemClock } from "../../lib/clock.ts";
import type { Command, CommandIo } from "../../lib/command/command.ts";
import { jsonLog } from "../../lib/log.ts";
import { selfCommand } from "../../lib/self-command.ts";
import { VERSION } from "../../lib/version.ts";
import { parseServeConfig, settingErrorsMessage } from "./config.ts";
import { startDaemon } from "./daemon.ts";
import { serveHelp } from "./serve-help.ts";

/**
 * Resolves on the first SIGTERM or SIGINT. Later signals are logged and otherwise ignored:
 * supervisors often deliver one signal twice (to the process and to its group), and a
 * duplicate must not turn a clean shutdown into an abrupt one. Shutdown is bounded anyway
 * (the drain timeout, one tick); SIGKILL remains for a daemon that truly hangs.
 */
function firstSignal(onRepeat: (signal: string) => void): {
  readonly received: Promise<string>;
  dispose(): void;
} {
  let seen = false;
  let resolveSignal: (signal: string) => void = () => {};
  const received = new Promise<string>((resolve) => {
    resolveSignal = resolve;
  });
  const handler = (signal: NodeJS.Signals) => {
    if (seen) {
      onRepeat(signal);
      return;
    }
    seen = true;
    resolveSignal(signal);
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
  return {
    received,
    dispose() {
      process.off("SIGTERM", handler);
      process.off("SIGINT", handler);
    },
  };
}

export const serveCommand: Command = {
  name: "serve",
  summary: "Run the daemon: admin API, reconciler and (opt-in) worker gateway",
  async run(args: readonly string[], io: CommandIo) {
    const self = selfCommand();
    const parsed = parseServeConfig(args, io.env, process.cwd(), homedir(), self, {
      daemonUid: process.getuid?.() ?? -1,
      accounts: systemAccounts(systemClock),
    });
    if (parsed.kind === "Help") {
      io.stdout(serveHelp());
      return 0;
    }
    const { options } = parsed;
    const log = jsonLog((line) => io.stderr(line), { level: options.logLevel });
    if (parsed.kind === "Invalid") {
      // Refused before anything is read or written, every bad variable named.
      const message = settingErrorsMessage(parsed.errors);
      log.error("configuration error", { message });
      io.stderr(`openai4s serve: ${message}\n`);
      return 2;
    }
    const started = await startDaemon({
      stateDir: options.stateDir,
      spoolDir: options.spoolDir,
      allowNetworkDb: options.allowNetworkDb,
      spoolLowWaterBytes: options.spoolLowWaterBytes,
      stateLowWaterBytes: options.stateLowWaterBytes,
      listen: options.listen,
      listenTls: options.listenTls,
      backend: options.backend,
      clusterConfigPath: options.clusterConfigPath,
      pacing: options.pacing,
      ...(options.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: options.bodyTimeoutMs } : {}),
      ...(options.maxUploadBytes !== undefined ? { maxUploadBytes: options.maxUploadBytes } : {}),
      version: VERSION,
      env: io.env,
      settings: parsed.settings,
      selfCommand: self,
      clock: systemClock,
      log,
      identity: options.identity,
      allowUnsandboxedBatch: options.allowUnsandboxedBatch,
      principalDefaults: options.principalDefaults,
      siteIdentity: options.siteIdentity,
    });
    switch (started.kind) {
      case "ConfigError":
        log.error("configuration error", { message: started.message });
        io.stderr(`openai4s serve: ${started.message}\n`);
        return 2;
      case "Failed":
        log.error("could not start", { message: started.message });
        io.stderr(`openai4s serve: ${started.message}\n`);
        return 1;
      case "Started":
        break;
      default: {
        const never: never = started;
        throw new Error(`unhandled start result ${JSON.stringify(never)}`);
      }
    }
    // Handlers go in only now: a usage or configuration error above exits at once.
    const signals = firstSignal((repeat) => {
      log.info("already stopping; signal ignored", { signal: repeat });
    });
    const signal = await signals.received;
    log.info("signal received", { signal });
    try {
      await started.daemon.stop();
    } finally {
      signals.dispose();
    }
    return 0;
  },
};
