/**
 * The supervisor as the compiled binary runs it (`dist/openai4s __supervise`): the mode a
 * real install uses. Runs when `bun run build` has produced the binary.
 */
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  cleanUpStates,
  lines,
  makeBackend,
  makeRequest,
  makeState,
  targetOf,
  waitForPhase,
} from "../support/local-backend.ts";

const binary = join(import.meta.dir, "../../dist/openai4s");

// Real processes on a machine other suites load too: generous, and the waits inside are
// bounded by their own deadlines.
setDefaultTimeout(60_000);

afterEach(() => {
  cleanUpStates();
});

test.skipIf(!existsSync(binary))(
  "the compiled binary supervises, times out and cancels",
  async () => {
    const state = makeState();
    const backend = makeBackend(state, { selfCommand: [binary] });
    const marker = join(state.root, "marker");
    const ok = makeRequest(state, ["sh", "-c", `echo ran >> ${marker}`]);
    const limited = makeRequest(state, ["sleep", "30"], { timeLimitSeconds: 1 });
    const cancelled = makeRequest(state, ["sleep", "30"]);
    await backend.submit([ok, limited, cancelled]);
    await waitForPhase(backend, cancelled, ["RUNNING"]);
    await backend.cancel([targetOf(cancelled)]);
    expect(await waitForPhase(backend, ok, ["COMPLETED", "FAILED", "LOST"])).toMatchObject({
      phase: "COMPLETED",
    });
    expect(await waitForPhase(backend, cancelled, ["CANCELLED", "FAILED", "LOST"])).toMatchObject({
      phase: "CANCELLED",
    });
    expect(await waitForPhase(backend, limited, ["COMPLETED", "FAILED", "LOST"])).toMatchObject({
      phase: "FAILED",
      reason: "TIME_LIMIT_EXCEEDED",
    });
    expect(lines(marker)).toEqual(["ran"]);
  },
);
