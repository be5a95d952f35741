/**
 * The squeue/sacct/sbatch parsers on generated output: what the tools print (in the formats
 * measured on Slurm 22.05) reads back exactly, and anything else is Malformed as a whole,
 * never a shorter list of jobs.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  parseExitStatus,
  parseLiveJobs,
  parseSacct,
  parseSbatchParsable,
  SACCT_FIELDS,
} from "../../src/adapters/backend-slurm/parse.ts";
import { parseSqueue, SQUEUE_FIELDS } from "../../src/adapters/backend-slurm/parse-squeue.ts";

const jobId = fc.bigInt({ min: 1n, max: 10n ** 12n }).map(String);
const state = fc.constantFrom(
  "PENDING",
  "RUNNING",
  "COMPLETED",
  "FAILED",
  "TIMEOUT",
  "CANCELLED",
  "CANCELLED by 0",
  "CANCELLED by 1000",
  "OUT_OF_MEMORY",
  "NODE_FAIL",
  "REQUEUE_HOLD",
);
const token = fc.stringMatching(/^o4s-[a-z0-9]{26}$/);
const epochSeconds = fc.integer({ min: 1, max: 4_000_000_000 });
const time = fc.option(epochSeconds, { nil: null });
const exit = fc.record({
  code: fc.integer({ min: 0, max: 255 }),
  signal: fc.integer({ min: 0, max: 127 }),
});
const workDir = fc.stringMatching(/^(\/[A-Za-z0-9._ -]{1,8}){1,4}$/);
/** Comments come last: even a `|` inside one must not shift a field. */
const comment = fc.oneof(
  token,
  fc.constant(""),
  fc.string({ maxLength: 20 }).filter((s) => !/[\n]/.test(s)),
);

const renderTime = (t: number | null, missing: string) => (t === null ? missing : String(t));

describe("squeue parser", () => {
  test("generated squeue output reads back exactly", () => {
    const row = fc.record({
      jobId,
      name: token,
      state,
      exit,
      startedAt: time,
      endedAt: time,
      reason: fc.constantFrom("None", "Resources", "Priority", "NonZeroExitCode"),
      workDir,
      comment,
    });
    fc.assert(
      fc.property(fc.array(row, { maxLength: 20 }), (rows) => {
        const text = rows
          .map((r) =>
            [
              r.jobId,
              r.name,
              r.state,
              String((r.exit.code << 8) | r.exit.signal),
              renderTime(r.startedAt, "N/A"),
              renderTime(r.endedAt, "N/A"),
              r.reason,
              r.workDir,
              r.comment === "" ? "(null)" : r.comment,
            ].join("|"),
          )
          .map((l) => `${l}\n`)
          .join("");
        const parsed = parseSqueue(text);
        if (parsed.kind !== "Parsed") throw new Error(parsed.message);
        expect(parsed.value).toEqual(
          rows.map((r) => ({
            jobId: r.jobId,
            name: r.name,
            state: r.state,
            exit: r.exit,
            startedAt: r.startedAt === null ? null : r.startedAt * 1000,
            endedAt: r.endedAt === null ? null : r.endedAt * 1000,
            reason: r.reason,
            workDir: r.workDir.trim(),
            comment: r.comment.trim() === "(null)" ? "" : r.comment.trim(),
          })),
        );
      }),
      { numRuns: 500 },
    );
  });

  test("the measured 22.05 output parses", () => {
    const text =
      "3|o4s-aaaaaaaaaaaaaaaaaaaaaaaaaa|FAILED|768|1795937085|1795937085|NonZeroExitCode|/tmp/x|o4s-aaaaaaaaaaaaaaaaaaaaaaaaaa\n" +
      "58|o4s-ffffffffffffffffffffffffff|CANCELLED|15|1795937350|1795937351|None|/tmp/x|(null)\n";
    const parsed = parseSqueue(text);
    expect(parsed).toMatchObject({
      kind: "Parsed",
      value: [
        { jobId: "3", state: "FAILED", exit: { code: 3, signal: 0 }, startedAt: 1795937085000 },
        { jobId: "58", state: "CANCELLED", exit: { code: 0, signal: 15 }, comment: "" },
      ],
    });
    expect(SQUEUE_FIELDS.length).toBe(9);
  });

  test("a single bad line voids the whole listing", () => {
    const good = "3|o4s-a|RUNNING|0|1|N/A|None|/w|o4s-a\n";
    const bad = fc.oneof(
      fc.constantFrom(
        "JOBID|NAME|STATE|EXIT|START|END|REASON|WORKDIR|COMMENT",
        "x|o4s-a|RUNNING|0|1|N/A|None|/w|c",
        "3|o4s-a|running now|0|1|N/A|None|/w|c",
        "3|o4s-a|RUNNING|zero|1|N/A|None|/w|c",
        "3|o4s-a|RUNNING|0",
        "slurm_load_jobs error: Unable to contact slurm controller",
        "3.batch|o4s-a|RUNNING|0|1|N/A|None|/w|c",
      ),
      fc
        .string({ maxLength: 40 })
        .filter((s) => !s.includes("\n") && s.split("|").length < SQUEUE_FIELDS.length),
    );
    fc.assert(
      fc.property(
        fc.array(fc.constant(good), { maxLength: 3 }),
        bad,
        fc.array(fc.constant(good), { maxLength: 3 }),
        (before, b, after) => {
          const parsed = parseSqueue([...before, `${b}\n`, ...after].join(""));
          expect(parsed.kind).toBe("Malformed");
        },
      ),
    );
  });

  test("arbitrary text never throws, and whatever parses is well-formed", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (text) => {
        const parsed = parseSqueue(text);
        if (parsed.kind === "Parsed")
          for (const r of parsed.value) expect(r.jobId).toMatch(/^[1-9][0-9]*$/);
      }),
      { numRuns: 2000 },
    );
  });

  test("empty output is zero jobs (squeue answered: nothing by those names)", () => {
    expect(parseSqueue("")).toEqual({ kind: "Parsed", value: [] });
  });
});

describe("squeue of the account's live jobs (the orphan sweep)", () => {
  test("rows read back; a (null) comment is empty; a | in the comment stays in it", () => {
    expect(parseLiveJobs("12|RUNNING|o4s-tok.1\n13|PENDING|(null)\n14|RUNNING|a|b\n")).toEqual({
      kind: "Parsed",
      value: [
        { jobId: "12", state: "RUNNING", comment: "o4s-tok.1" },
        { jobId: "13", state: "PENDING", comment: "" },
        { jobId: "14", state: "RUNNING", comment: "a|b" },
      ],
    });
  });

  test.each([
    ["a state that is not a state word", "12|running;x|tok\n"],
    ["a job id that is not one", "x12|RUNNING|tok\n"],
    ["a row one field short", "12|RUNNING\n"],
  ])("%s makes the whole listing Malformed", (_label, stdout) => {
    // Guards the sweep: a listing read wrongly could cancel a job that is not an orphan.
    expect(parseLiveJobs(stdout).kind).toBe("Malformed");
  });
});

describe("sacct parser", () => {
  test("generated sacct --parsable2 output reads back exactly", () => {
    const row = fc.record({
      jobId,
      name: fc.oneof(token, fc.constant("allocation")),
      state,
      exit,
      submittedAt: time,
      startedAt: time,
      endedAt: time,
      comment,
    });
    fc.assert(
      fc.property(fc.array(row, { maxLength: 20 }), (rows) => {
        const text = rows
          .map((r) =>
            [
              r.jobId,
              r.name,
              r.state,
              `${r.exit.code}:${r.exit.signal}`,
              renderTime(r.submittedAt, "Unknown"),
              renderTime(r.startedAt, "None"),
              renderTime(r.endedAt, "Unknown"),
              r.comment,
            ].join("|"),
          )
          .map((l) => `${l}\n`)
          .join("");
        const parsed = parseSacct(text);
        if (parsed.kind !== "Parsed") throw new Error(parsed.message);
        expect(parsed.value).toEqual(
          rows.map((r) => ({
            jobId: r.jobId,
            name: r.name,
            state: r.state,
            exit: r.exit,
            submittedAt: r.submittedAt === null ? null : r.submittedAt * 1000,
            startedAt: r.startedAt === null ? null : r.startedAt * 1000,
            endedAt: r.endedAt === null ? null : r.endedAt * 1000,
            comment: r.comment,
          })),
        );
      }),
      { numRuns: 500 },
    );
    expect(SACCT_FIELDS.at(-1)).toBe("Comment");
  });

  test("a step row, a header or an error line voids the answer", () => {
    for (const line of [
      "12.batch|batch|COMPLETED|0:0|1|1|1|",
      "JobID|JobName|State|ExitCode|Submit|Start|End|Comment",
      "sacct: error: Problem talking to the database: Connection refused",
      "12|x|COMPLETED|0|1|1|1|",
    ]) {
      expect(parseSacct(`1|o4s-a|RUNNING|0:0|1|1|Unknown|\n${line}\n`).kind).toBe("Malformed");
    }
  });
});

describe("sbatch --parsable and exit statuses", () => {
  test("a job id, optionally with a cluster name, and nothing else", () => {
    expect(parseSbatchParsable("42\n")).toEqual({ kind: "Parsed", value: "42" });
    expect(parseSbatchParsable("42;ci\n")).toEqual({ kind: "Parsed", value: "42" });
    for (const bad of ["", "\n", "Submitted batch job 42\n", "42\n43\n", "0\n", "-1\n", "42;\n"]) {
      expect(parseSbatchParsable(bad).kind).toBe("Malformed");
    }
    fc.assert(
      fc.property(fc.string(), (s) => {
        const parsed = parseSbatchParsable(s);
        if (parsed.kind === "Parsed") expect(parsed.value).toMatch(/^[1-9][0-9]*$/);
      }),
    );
  });

  test("code:signal and raw wait statuses", () => {
    fc.assert(
      fc.property(exit, ({ code, signal }) => {
        expect(parseExitStatus(`${code}:${signal}`, "code:signal")).toEqual({
          kind: "Parsed",
          value: { code, signal },
        });
        expect(parseExitStatus(String((code << 8) | signal), "wait-status")).toEqual({
          kind: "Parsed",
          value: { code, signal },
        });
      }),
    );
    expect(parseExitStatus("", "code:signal")).toEqual({ kind: "Parsed", value: null });
    for (const bad of ["3:", "a:b", "1:2:3", "999:0", "7"]) {
      expect(parseExitStatus(bad, "code:signal").kind).toBe("Malformed");
    }
    for (const bad of ["3:0", "70000", "-1", "x"]) {
      expect(parseExitStatus(bad, "wait-status").kind).toBe("Malformed");
    }
  });
});
