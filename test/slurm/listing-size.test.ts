/**
 * Listings at 10,000 live jobs. Linux refuses to start a program with one argument longer
 * than 128 KiB (E2BIG): squeue's `--name=` with every watched job's name reached it at about
 * 4,200 jobs, and every tick after that was "scheduler unavailable". The first test execs a
 * real program (a stand-in squeue on a private PATH), so the kernel's limit is the one tested.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import {
  LIST_ARGUMENT_BUDGET_BYTES,
  listPieces,
} from "../../src/adapters/backend-slurm/broker-argv.ts";
import { createSqueueMemo, parseSqueue } from "../../src/adapters/backend-slurm/parse-squeue.ts";
import { recordingRunner } from "../support/recording-runner.ts";
import { newToken } from "../support/slurm-fixtures.ts";
import { tempDir } from "../support/temp-dir.ts";

const JOBS = 10_000;
/** Linux's MAX_ARG_STRLEN: 32 pages of 4 KiB. */
const MAX_ARG_STRLEN = 32 * 4096;

const line = (id: string, name: string, comment = `${name}.owner`) =>
  `${id}|${name}|RUNNING|0|1700000000|1700086400|None|/spool/w|${comment}\n`;

describe("10,000 live jobs", () => {
  test("one squeue lists them: a real exec, every argument under the kernel's limit", async () => {
    using dir = tempDir("o4s-listing-");
    const names = Object.freeze(Array.from({ length: JOBS }, () => newToken()));
    const argsFile = join(dir.path, "args");
    // The stand-in prints two of the 10,000 jobs and one job of somebody else's, and
    // writes down the arguments it was started with.
    writeFileSync(
      join(dir.path, "squeue"),
      `#!/bin/sh\nprintf '%s\\n' "$@" > '${argsFile}'\n/bin/cat <<'EOF'\n${line("7", names[0] as string)}${line("8", "by-hand", "x")}${line("9", names[JOBS - 1] as string)}EOF\n`,
    );
    chmodSync(join(dir.path, "squeue"), 0o755);
    const broker = createSlurmBroker({ path: dir.path, listUid: 4242 });
    const answer = await broker.listQueue(names);
    if (answer.kind !== "Answered") throw new Error(answer.error.message);
    expect(answer.value.map((r) => r.jobId)).toEqual(["7", "9"]);
    expect(broker.callCounts().squeue).toBe(1);
    const args = readFileSync(argsFile, "utf8").trimEnd().split("\n");
    expect(args).toContain("--user=4242");
    expect(Math.max(...args.map((a) => Buffer.byteLength(a)))).toBeLessThan(MAX_ARG_STRLEN);
  });

  test("sacct's lists of names and ids are cut into pieces under the limit, none lost", async () => {
    const names = Array.from({ length: JOBS }, () => newToken());
    const ids = Array.from({ length: 3 * JOBS }, (_, i) => String(1_000_000 + i));
    const { runner, calls } = recordingRunner(() => "");
    const broker = createSlurmBroker({ runner, path: "/usr/bin:/bin" });
    const byName = await broker.listAccounting({
      kind: "ByNames",
      names,
      lookbackSeconds: 3600,
    });
    const byId = await broker.listAccounting({ kind: "ByJobIds", jobIds: ids });
    const usage = await broker.listUsage(ids);
    expect([byName.kind, byId.kind, usage.kind]).toEqual(["Answered", "Answered", "Answered"]);
    const listed = (option: string) =>
      calls.flatMap((c) =>
        c.args.filter((a) => a.startsWith(`--${option}=`)).map((a) => a.slice(option.length + 3)),
      );
    for (const arg of [...listed("name"), ...listed("jobs")]) {
      expect(Buffer.byteLength(arg)).toBeLessThanOrEqual(LIST_ARGUMENT_BUDGET_BYTES);
    }
    expect(listed("name").flatMap((a) => a.split(","))).toEqual(names);
    expect(listed("jobs").flatMap((a) => a.split(","))).toEqual([...ids, ...ids]);
    // A list that fits is one call, as before.
    const before = calls.length;
    await broker.listAccounting({
      kind: "ByNames",
      names: names.slice(0, 100),
      lookbackSeconds: 1,
    });
    expect(calls.length).toBe(before + 1);
  });

  test("listPieces keeps order and never exceeds its budget", () => {
    const items = Array.from({ length: 500 }, (_, i) => "x".repeat(1 + (i % 37)));
    for (const budget of [1, 10, 64, 1000, 1 << 20]) {
      const pieces = listPieces(items, budget);
      expect(pieces.flat()).toEqual(items);
      for (const piece of pieces) {
        if (piece.length > 1) expect(piece.join(",").length).toBeLessThanOrEqual(budget);
      }
    }
    expect(listPieces([])).toEqual([]);
  });
});

describe("a listing by user holds other jobs of the account", () => {
  const ours = newToken();
  const wanted = new Set([ours]);
  const oursLine = line("10", ours);

  test("someone else's job with a | or a newline in its name or comment is skipped", () => {
    const listing = [
      line("5", "evil|na\nme"),
      line("6", "plain", "c|x\nmore"),
      oursLine,
      line("7_[1-3]", "by-hand-array"),
    ].join("");
    for (const memo of [undefined, createSqueueMemo()]) {
      const parsed = parseSqueue(listing, memo, wanted);
      expect(parsed).toMatchObject({ kind: "Parsed", value: [{ jobId: "10", name: ours }] });
    }
  });

  test("garbage is still no answer, never an empty queue", () => {
    for (const garbage of [
      "<html>502 Bad Gateway</html>\n",
      `${oursLine}continued|after|one|of|ours\n`,
      "slurm_load_jobs error: something\n",
    ]) {
      for (const memo of [undefined, createSqueueMemo()]) {
        expect(parseSqueue(garbage, memo, wanted).kind).toBe("Malformed");
      }
    }
  });

  test("the memo answers by the names it filtered with: another set, another reading", () => {
    const other = newToken();
    const listing = `${oursLine}${line("11", other)}`;
    const memo = createSqueueMemo();
    const first = parseSqueue(listing, memo, wanted);
    const both = parseSqueue(listing, memo, new Set([ours, other]));
    expect(first.kind === "Parsed" && first.value.map((r) => r.jobId)).toEqual(["10"]);
    expect(both.kind === "Parsed" && both.value.map((r) => r.jobId)).toEqual(["10", "11"]);
  });
});
