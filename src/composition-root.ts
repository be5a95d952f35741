/**
 * The composition root: the one module outside src/orchestration/slurm/ that may name the
 * scheduler, because it is where backends are chosen and wired. Everything else talks to the
 * AllocationBackend port. (INV-2: the leak guard exempts this file by name.)
 *
 * Sections are owned by different parts of the daemon; keep edits surgical.
 */
export {};
