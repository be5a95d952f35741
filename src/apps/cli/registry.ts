/**
 * Every subcommand of the binary. Each lives in its own module; this list is the only place
 * that knows them all (and the source of `openai4s --help`).
 *
 * A command's module is imported only when that command runs: `openai4s --version`, `list`
 * or `wait` in a script's loop must not evaluate the daemon's graph (the store, the HTTP
 * server, both backends), which made every CLI call start in twice the time a one-line
 * script takes (bench/startup.bench.ts). The name and summary are written here so `--help`
 * loads nothing; test/cli/registry.test.ts checks they match what each module exports.
 */

import type { Command } from "../../lib/command/command.ts";

export interface CommandEntry {
  readonly name: string;
  readonly summary: string;
  /** Hidden commands are internal modes of the binary (e.g. the local job supervisor). */
  readonly hidden?: boolean;
  /** The command itself, its module imported now. Static specifiers: the binary bundles them. */
  load(): Promise<Command>;
}

export const COMMANDS: readonly CommandEntry[] = [
  {
    name: "serve",
    summary: "Run the daemon: admin API, reconciler and (opt-in) worker gateway",
    load: async () => (await import("../daemon/serve-command.ts")).serveCommand,
  },
  {
    name: "submit",
    summary: "Submit a BATCH workload",
    load: async () => (await import("./submit.ts")).submitCommand,
  },
  {
    name: "session",
    summary: "Start an interactive SESSION (`session start`)",
    load: async () => (await import("./session.ts")).sessionCommand,
  },
  {
    name: "exec",
    summary: "Run code in a READY session's kernel",
    load: async () => (await import("./exec.ts")).execCommand,
  },
  {
    name: "interrupt",
    summary: "Interrupt the code running in a session",
    load: async () => (await import("./interrupt.ts")).interruptCommand,
  },
  {
    name: "restart",
    summary: "Restart a session's kernel",
    load: async () => (await import("./restart.ts")).restartCommand,
  },
  {
    name: "mcp",
    summary: "Serve MCP on stdio for an agent (through the daemon's /mcp)",
    load: async () => (await import("./mcp.ts")).mcpCommand,
  },
  {
    name: "list",
    summary: "List workloads",
    load: async () => (await import("./list.ts")).listCommand,
  },
  {
    name: "show",
    summary: "Show one workload with its conditions and allocations",
    load: async () => (await import("./show.ts")).showCommand,
  },
  {
    name: "logs",
    summary: "Print a workload's output (stdout or stderr)",
    load: async () => (await import("./logs.ts")).logsCommand,
  },
  {
    name: "cp",
    summary: "Copy a file into or out of a workload's workspace (ID:path)",
    load: async () => (await import("./cp.ts")).cpCommand,
  },
  {
    name: "cancel",
    summary: "Cancel a workload (idempotent)",
    load: async () => (await import("./cancel.ts")).cancelCommand,
  },
  {
    name: "release",
    summary: "Let a held workload run",
    load: async () => (await import("./release.ts")).releaseCommand,
  },
  {
    name: "wait",
    summary: "Wait until a workload is READY or terminal",
    load: async () => (await import("./wait.ts")).waitCommand,
  },
  {
    name: "principal",
    summary: "Add, list or remove principals (admin only)",
    load: async () => (await import("./principal.ts")).principalCommand,
  },
  {
    name: "token",
    summary: "Issue or revoke a principal's token (admin only)",
    load: async () => (await import("./token.ts")).tokenCommand,
  },
  {
    name: "audit",
    summary: "Print the audit log of state-changing requests (admin only)",
    load: async () => (await import("./audit.ts")).auditCommand,
  },
  {
    name: "profiles",
    summary: "List the profiles the daemon's backend offers",
    load: async () => (await import("./profiles.ts")).profilesCommand,
  },
  {
    name: "check-config",
    summary: "Validate a cluster.toml and print its profiles",
    load: async () => (await import("./check-config.ts")).checkConfigCommand,
  },
  {
    name: "backup",
    summary: "Copy the daemon's store while it runs (refuses to overwrite)",
    load: async () => (await import("./backup.ts")).backupCommand,
  },
  {
    name: "restore",
    summary: "Put a backup in place of a stopped daemon's store",
    load: async () => (await import("../daemon/restore-command.ts")).restoreCommand,
  },
  {
    name: "worker",
    summary: "The worker role (what `openai4s-worker` runs)",
    hidden: true,
    load: async () => (await import("../worker/worker-command.ts")).workerCommand,
  },
  {
    name: "__supervise",
    summary: "Internal: the local backend's job supervisor",
    hidden: true,
    load: async () => (await import("../daemon/composition/index.ts")).superviseCommand,
  },
];
