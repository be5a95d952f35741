/**
 * A listing row one field short is malformed, never read with its last field empty: the
 * last field is the Comment, where the submission token travels, and a row read without it
 * matches no workload, which the reconciler would count towards LOST (issue 33's survivor).
 */
import { describe, expect, test } from "bun:test";
import { parseLiveJobs, parseSacct } from "../../src/adapters/backend-slurm/parse.ts";
import { parseSqueue } from "../../src/adapters/backend-slurm/parse-squeue.ts";

const SQUEUE_ROW = "437|o4s-a|RUNNING|0|1795937085|N/A|None|/w|o4s-tok";
const SACCT_ROW = "437|o4s-a|COMPLETED|0:0|1795937085|1795937086|1795937090|o4s-tok";
const LIVE_ROW = "437|RUNNING|o4s-tok";

/** The row with its last `|field` cut off: one field short. */
function oneShort(row: string): string {
  return row.slice(0, row.lastIndexOf("|"));
}

describe("a row one field short", () => {
  test("squeue: the whole listing is malformed, naming the count", () => {
    expect(parseSqueue(`${SQUEUE_ROW}\n`).kind).toBe("Parsed");
    const parsed = parseSqueue(`${SQUEUE_ROW}\n${oneShort(SQUEUE_ROW)}\n`);
    expect(parsed.kind === "Malformed" && parsed.message).toContain("8 fields, expected 9");
  });

  test("sacct: the whole answer is malformed, naming the count", () => {
    const whole = parseSacct(`${SACCT_ROW}\n`);
    expect(whole.kind === "Parsed" && whole.value[0]?.comment).toBe("o4s-tok");
    const parsed = parseSacct(`${oneShort(SACCT_ROW)}\n`);
    expect(parsed.kind === "Malformed" && parsed.message).toContain("7 fields, expected 8");
  });

  test("the orphan sweep's squeue: malformed, not a job without a token", () => {
    expect(parseLiveJobs(`${LIVE_ROW}\n`).kind).toBe("Parsed");
    const parsed = parseLiveJobs(`${oneShort(LIVE_ROW)}\n`);
    expect(parsed.kind === "Malformed" && parsed.message).toContain("2 fields, expected 3");
  });

  test("a `|` inside the Comment stays in the Comment", () => {
    const parsed = parseSacct(`${SACCT_ROW}|more\n`);
    expect(parsed.kind === "Parsed" && parsed.value[0]?.comment).toBe("o4s-tok|more");
  });
});
