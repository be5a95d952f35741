/**
 * The composition root: the one module outside src/orchestration/slurm/ that may name the
 * scheduler, because it is where backends are chosen and wired. Everything else talks to the
 * AllocationBackend port. (INV-2: the leak guard exempts this file by name.)
 *
 * Sections are owned by different parts of the daemon; keep edits surgical.
 */

// Internal modes of the binary that belong to a backend: the CLI registry reaches them only
// through here, so no module outside this file imports a backend package.
export { superviseCommand } from "./orchestration/local/supervise-command.ts";
