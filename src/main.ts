#!/usr/bin/env bun
/**
 * One executable, two roles. Invoked as `openai4s-worker` (through the symlink, or any path
 * whose basename starts so) it is the worker a backend starts on a compute node; otherwise
 * the first argument names the subcommand. `process.argv0` is the invoked name in a compiled
 * Bun binary (argv[0] is always "bun").
 */
import { COMMANDS } from "./apps/cli/registry.ts";
import {
  type Command,
  type CommandIo,
  ConnectionLost,
  processIo,
  UsageError,
} from "./lib/command/command.ts";
import { VERSION } from "./lib/version.ts";

export function usage(): string {
  const lines = COMMANDS.filter((c) => !c.hidden).map((c) => `  ${c.name.padEnd(14)} ${c.summary}`);
  return [
    `openai4s ${VERSION}: puts scientists' sessions and batch jobs onto compute.`,
    "",
    "Usage: openai4s <command> [options]",
    "       openai4s-worker [options]     (the worker role, started by a backend)",
    "",
    "Commands:",
    ...lines,
    "",
    "Run `openai4s <command> --help` for a command's options. The client options --server,",
    "--token-file and --json may also stand before the command.",
    "Exit codes: 0 success, 1 operation failed, 2 usage or configuration error.",
    "",
  ].join("\n");
}

export async function main(argv0: string, args: readonly string[], io: CommandIo): Promise<number> {
  // Not node:path's basename: a short command should load nothing it does not use.
  const invoked = argv0.slice(argv0.lastIndexOf("/") + 1);
  if (invoked.startsWith("openai4s-worker")) {
    const worker = COMMANDS.find((c) => c.name === "worker");
    if (!worker) throw new Error("worker command is not registered");
    return run(await worker.load(), args, io);
  }
  const { globals, rest: afterGlobals } = leadingClientOptions(args);
  const [first, ...rest] = afterGlobals;
  if (first === undefined) {
    // No subcommand is a usage error (exit 2), so a script that lost its argument fails.
    io.stderr(usage());
    return 2;
  }
  if (first === "--help" || first === "-h" || first === "help") {
    io.stdout(usage());
    return 0;
  }
  if (first === "--version" || first === "-V" || first === "version") {
    io.stdout(`openai4s ${VERSION}\n`);
    return 0;
  }
  const entry = COMMANDS.find((c) => c.name === first);
  if (!entry) {
    // One line that says what to type, not a screen of help to search for it.
    const names = COMMANDS.filter((c) => !c.hidden).map((c) => c.name);
    // Loaded only here: a correct command pays nothing for the suggestion (startup.test.ts).
    const { didYouMean } = await import("./lib/command/suggest.ts");
    io.stderr(
      `openai4s: unknown command ${JSON.stringify(first)}${didYouMean(first, names)}\n` +
        "Run `openai4s --help` for the list of commands.\n",
    );
    return 2;
  }
  // The command parses them as its own: a command without client options says so by name.
  return run(await entry.load(), [...globals, ...rest], io);
}

/** The client options every client command takes, and whether each takes a value. */
const CLIENT_OPTIONS: Readonly<Record<string, boolean>> = {
  "--server": true,
  "--token-file": true,
  "--json": false,
};

/**
 * `openai4s --token-file F profiles`: client options written before the command, as
 * git's users write `git -C DIR status`, are moved after it. Only the client
 * options move; anything else before the command stays where it is and is reported.
 */
export function leadingClientOptions(args: readonly string[]): {
  readonly globals: readonly string[];
  readonly rest: readonly string[];
} {
  const globals: string[] = [];
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as string;
    const name = arg.split("=")[0] as string;
    if (!Object.hasOwn(CLIENT_OPTIONS, name)) break;
    const takesValue = CLIENT_OPTIONS[name];
    const inline = arg.includes("=");
    const count = takesValue && !inline && i + 1 < args.length ? 2 : 1;
    globals.push(...args.slice(i, i + count));
    i += count;
  }
  return { globals, rest: args.slice(i) };
}

/**
 * Runs a subcommand; a usage error is printed as `openai4s COMMAND: message`, one prefix for
 * every command whether or not the message already named it.
 */
async function run(command: Command, args: readonly string[], io: CommandIo): Promise<number> {
  const name = command.name;
  try {
    return await command.run(args, io);
  } catch (error) {
    if (error instanceof UsageError) {
      const own = `${name}: `;
      const text = error.message.startsWith(own) ? error.message.slice(own.length) : error.message;
      io.stderr(`openai4s ${name}: ${text}\nTry \`openai4s ${name} --help\`.\n`);
      return 2;
    }
    if (error instanceof ConnectionLost) {
      io.stderr(`openai4s ${name}: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

if (import.meta.main) {
  // `openai4s list | head -1`: processIo ends the process quietly when its reader went away,
  // and with exit 1 and one line when its output is lost (a full disk).
  const code = await main(process.argv0, process.argv.slice(2), processIo);
  process.exitCode = code;
}
