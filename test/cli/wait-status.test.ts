import { expect, test } from "bun:test";
import { endedStatus } from "../../src/apps/cli/wait-status.ts";

const ended = (phase: string, reason: string | null, exitCode: number | null) =>
  endedStatus({ phase: phase as never, reason, exitCode });

test.each([
  ["COMPLETED", "EXITED_ZERO", 0, 0],
  ["FAILED", "NONZERO_EXIT", 3, 3],
  ["FAILED", "NONZERO_EXIT", 255, 255],
  ["FAILED", "OUT_OF_MEMORY", 137, 137],
  // No code a shell can carry: the generic failure, never a false 0.
  ["FAILED", "NONZERO_EXIT", 0, 1],
  ["FAILED", "NONZERO_EXIT", 256, 1],
  ["FAILED", "NONZERO_EXIT", -9, 1],
  ["FAILED", "SUBMIT_REJECTED", null, 1],
  ["FAILED", "TIME_LIMIT_EXCEEDED", 0, 124],
  ["CANCELLED", "USER_CANCELLED", null, 143],
  ["CANCELLED", "ADMIN_CANCELLED", 15, 143],
  ["LOST", "NOT_FOUND_BY_BACKEND", null, 69],
] as const)("%s %s exit %p: wait exits %d", (phase, reason, exitCode, status) => {
  expect(ended(phase, reason, exitCode)).toBe(status);
});
