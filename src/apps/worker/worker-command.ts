/**
 * `openai4s-worker`: the process a backend starts on each node of an interactive allocation.
 * Its argv carries only paths and names, never a secret: the credential is read from a 0600
 * file, and the rank from an environment variable whose NAME the backend passes, so the
 * worker never needs to know which launcher set it.
 */

import { ENVIRONMENT_NAME } from "../../core/environments.ts";
import { systemClock, systemTimers } from "../../lib/clock.ts";
import type { Command, CommandIo } from "../../lib/command/command.ts";
import { UsageError } from "../../lib/command/command.ts";
import { jsonLog } from "../../lib/log.ts";
import type { KernelEnvironment } from "./kernel-launch.ts";
import { makeNonDumpable } from "./non-dumpable.ts";
import { runWorker, workerExitCode } from "./worker.ts";

const WORKER_HELP = `Usage: openai4s-worker --credential-dir DIR --rank-env NAME [options]
       openai4s worker --credential-dir DIR --rank-env NAME [options]

The worker role, started by a backend on each node of an interactive session. It first makes
itself non-dumpable (so the session's code, which runs as the same user, cannot read its
memory or environment through /proc), then reads its credential from DIR/rank-<RANK>.cred, where RANK is the value of the environment variable NAME,
dials the daemon's worker gateway named in that file (retrying until the credential expires),
and then serves heartbeats, workspace probes and a persistent Python 3 kernel.

Options:
  --credential-dir DIR   directory holding one credential file per rank (required)
  --rank-env NAME        environment variable that holds this worker's rank (required)
  --grace-seconds N      how long a lost connection may stay lost before exiting (default 60)
  --python PATH          Python 3 interpreter for the kernel (default: python3 on PATH)
  --max-output-chars N   a cell's output sent per stream (first and last halves); past it
                         the whole output goes to openai4s-outputs/ in the workspace
                         (default 200000; the profile's max_output_chars)
  --environment-prefix DIR  the profile environment's venv or conda prefix: its bin first
                         on the kernel's PATH (set by the daemon from the profile)
  --kernel-setup LINE    a shell line run by bash before the kernel starts, e.g. a module
                         load (repeatable; set by the daemon from the profile)
  --environment-name NAME  the profile environment these belong to: its prefix and
                         interpreter are checked on this node, and its module lines run
                         once, before the kernel starts; what fails is reported to the
                         daemon (naming the path or line, and the node) and the worker
                         exits 1 (set by the daemon from the profile)
  --node-env NAME        environment variable that holds this node's name, for that report
                         (set by a cluster's backend; default: the host name)
  --gateway-socket PATH  dial the gateway at this unix socket instead of the credential's
                         TCP address (set by the local backend for a job without network)
  -h, --help             show this help

Exit codes: 0 stopped by the daemon (or by SIGTERM/SIGINT), 1 refused, unreachable,
connection lost for longer than the grace period, or the environment cannot run here,
2 usage or credential-file problem, or the process could not be made non-dumpable (no
credential is read then).
`;

interface WorkerArgs {
  readonly credentialDir: string;
  readonly rankEnv: string;
  readonly graceSeconds: number;
  readonly python: string;
  readonly gatewaySocket: string | null;
  readonly maxOutputChars: number | null;
  readonly environment: KernelEnvironment | undefined;
  readonly environmentName: string | null;
  readonly nodeEnv: string | null;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RANK = /^(0|[1-9][0-9]{0,6})$/;
/** A node's name as a report may carry it: a host name, nothing a shell or log would mangle. */
const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/;

/** `value` when it matches `pattern`; else a usage error saying what `arg` takes. */
function matching(arg: string, value: string, pattern: RegExp, what: string): string {
  if (!pattern.test(value)) throw new UsageError(`${arg} ${JSON.stringify(value)} is not ${what}`);
  return value;
}

function parseWorkerArgs(args: readonly string[]): WorkerArgs | "help" {
  let credentialDir: string | undefined;
  let rankEnv: string | undefined;
  let graceSeconds = 60;
  let python = "python3";
  let gatewaySocket: string | null = null;
  let maxOutputChars: number | null = null;
  let prefix: string | null = null;
  const setupLines: string[] = [];
  let environmentName: string | null = null;
  let nodeEnv: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "-h" || arg === "--help") return "help";
    const value = () => {
      const next = args[++i];
      if (next === undefined) throw new UsageError(`${arg} needs a value`);
      return next;
    };
    switch (arg) {
      case "--credential-dir":
        credentialDir = value();
        break;
      case "--rank-env":
        rankEnv = matching(arg, value(), ENV_NAME, "a variable name");
        break;
      case "--grace-seconds": {
        const raw = value();
        graceSeconds = Number(raw);
        if (!/^[0-9]+$/.test(raw) || graceSeconds > 86_400) {
          throw new UsageError(`--grace-seconds must be a whole number of seconds ≤ 86400`);
        }
        break;
      }
      case "--python":
        python = value();
        break;
      case "--max-output-chars": {
        const raw = value();
        maxOutputChars = Number(raw);
        if (!/^[0-9]+$/.test(raw) || maxOutputChars < 1000 || maxOutputChars > 100_000_000) {
          throw new UsageError("--max-output-chars must be a whole number from 1000 to 100000000");
        }
        break;
      }
      case "--environment-prefix":
        prefix = value();
        if (!prefix.startsWith("/"))
          throw new UsageError("--environment-prefix must be an absolute path");
        break;
      case "--kernel-setup":
        setupLines.push(value());
        break;
      case "--environment-name":
        environmentName = matching(arg, value(), ENVIRONMENT_NAME, "an environment name");
        break;
      case "--node-env":
        nodeEnv = matching(arg, value(), ENV_NAME, "a variable name");
        break;
      case "--gateway-socket":
        gatewaySocket = value();
        if (!gatewaySocket.startsWith("/")) {
          throw new UsageError("--gateway-socket must be an absolute path");
        }
        break;
      default:
        throw new UsageError(`unknown option ${JSON.stringify(arg)}`);
    }
  }
  if (credentialDir === undefined) throw new UsageError("--credential-dir is required");
  if (rankEnv === undefined) throw new UsageError("--rank-env is required");
  const environment =
    prefix === null && setupLines.length === 0 ? undefined : { prefix, setupLines };
  return {
    credentialDir,
    rankEnv,
    graceSeconds,
    python,
    gatewaySocket,
    maxOutputChars,
    environment,
    environmentName,
    nodeEnv,
  };
}

export const workerCommand: Command = {
  name: "worker",
  summary: "The worker role (what `openai4s-worker` runs)",
  hidden: true,
  async run(args, io) {
    const parsed = parseWorkerArgs(args);
    if (parsed === "help") {
      io.stdout(WORKER_HELP);
      return 0;
    }
    const rankText = io.env[parsed.rankEnv];
    if (rankText === undefined || !RANK.test(rankText)) {
      io.stderr(
        `openai4s-worker: ${parsed.rankEnv} must hold this worker's rank (a whole number ≥ 0), got ${
          rankText === undefined ? "nothing" : JSON.stringify(rankText)
        }\n`,
      );
      return 2;
    }
    return runWithSignals(io, {
      credentialDir: parsed.credentialDir,
      rank: Number(rankText),
      graceMs: parsed.graceSeconds * 1000,
      python: parsed.python,
      ...(parsed.environment === undefined ? {} : { environment: parsed.environment }),
      ...(parsed.gatewaySocket === null ? {} : { gatewaySocket: parsed.gatewaySocket }),
      ...(parsed.maxOutputChars === null ? {} : { maxOutputChars: parsed.maxOutputChars }),
      ...(parsed.environmentName === null ? {} : { environmentName: parsed.environmentName }),
      ...nodeOf(parsed.nodeEnv === null ? undefined : io.env[parsed.nodeEnv]),
    });
  },
};

/** The launcher's name for this node when it is one a report may carry; else the host name. */
function nodeOf(value: string | undefined): { node?: string } {
  return value !== undefined && NODE_NAME.test(value) ? { node: value } : {};
}

async function runWithSignals(
  io: CommandIo,
  args: {
    credentialDir: string;
    rank: number;
    graceMs: number;
    python: string;
    gatewaySocket?: string;
    maxOutputChars?: number;
    environment?: KernelEnvironment;
    environmentName?: string;
    node?: string;
  },
): Promise<number> {
  const log = jsonLog((line) => io.stderr(line));
  // Before the credential is read: the kernel's code runs as our uid and could otherwise
  // read it from /proc/<worker>/mem (non-dumpable.ts). Without that, no credential is read.
  const dumpable = makeNonDumpable();
  if (dumpable.kind === "Failed") {
    log.error(`worker: cannot protect the credential from the kernel: ${dumpable.message}`);
    return 2;
  }
  // SIGTERM is how a backend cancels: end the kernel (and all it started) before exiting,
  // since it runs in its own process group and would not get the signal itself.
  const controller = new AbortController();
  const signals = ["SIGTERM", "SIGINT", "SIGHUP"] as const;
  const onSignal = (name: string) => {
    log.info("worker: signal received, stopping", { signal: name });
    controller.abort();
  };
  for (const s of signals) process.on(s, onSignal);
  try {
    const exit = await runWorker(
      { ...args, log, clock: systemClock, timers: systemTimers },
      controller.signal,
    );
    switch (exit.kind) {
      case "Stopped":
        log.info("worker: exiting", { reason: exit.reason });
        break;
      case "Refused":
        log.error("worker: the gateway refused the credential; not retrying");
        break;
      case "Unreachable":
      case "Lost":
      case "BadCredential":
      case "EnvironmentUnavailable":
        log.error(`worker: ${exit.message}`);
        break;
      case "WrongCertificate":
        log.error(`worker: refusing to talk to the gateway: ${exit.message}`);
        break;
      default: {
        const never: never = exit;
        throw new Error(`unhandled worker exit ${JSON.stringify(never)}`);
      }
    }
    return workerExitCode(exit);
  } finally {
    for (const s of signals) process.off(s, onSignal);
  }
}
