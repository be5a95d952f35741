/**
 * The squeue memo reads a listing that is the last one with a few lines changed in place by
 * comparing blocks and parsing only the changed lines (parse-squeue.ts, inPlace), and any
 * other listing line by line. Over generated sequences of listings (lines changed in place,
 * inserted, removed, repeated, someone else's multi-line records, garbage, another name set)
 * every answer must be exactly the plain parser's, a line that stayed must keep its row
 * object (the change feed tells "unchanged" by identity), and the memo must hold exactly the
 * lines of the last listing that parsed. An answer once given never changes after, and a
 * patch names exactly the rows in which its answer differs from the one before.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  createSqueueMemo,
  parseSqueue,
  type QueueRow,
} from "../../src/adapters/backend-slurm/parse-squeue.ts";

const OURS = ["o4s-aaaa", "o4s-bbbb"] as const;
const row = (id: string, name: string, state: string) =>
  `${id}|${name}|${state}|0|N/A|N/A|None|/w|(null)`;
const POOL: readonly string[] = [
  row("101", OURS[0], "RUNNING"),
  row("101", OURS[0], "PENDING"),
  row("102", OURS[1], "RUNNING"),
  row("102", OURS[1], "COMPLETED"),
  row("103", OURS[0], "RUNNING"),
  row("104_[1-3]", OURS[1], "PENDING"),
  row("104_2", OURS[1], "RUNNING"),
  // Someone else's jobs, one continued on the next line (a newline in its comment).
  row("200", "by-hand", "RUNNING"),
  row("201", "by|hand", "PENDING"),
  "rest of a comment",
  "",
  // One of ours that does not parse: the whole answer is malformed.
  row("105", OURS[0], "not a state"),
];

type Edit =
  | { readonly kind: "set"; readonly at: number; readonly line: number }
  | { readonly kind: "insert"; readonly at: number; readonly line: number }
  | { readonly kind: "remove"; readonly at: number };

const lineArb = fc.nat(POOL.length - 1);
const editArb: fc.Arbitrary<Edit> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant("set" as const), at: fc.nat(), line: lineArb }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), line: lineArb }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const), at: fc.nat() }) },
);

interface Step {
  readonly edits: readonly Edit[];
  /** 0: the usual set of names (the same object); 1: an equal set, another object; 2: none. */
  readonly names: 0 | 1 | 2;
  readonly finalNewline: boolean;
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  edits: fc.array(editArb, { maxLength: 4 }),
  names: fc.constantFrom(0, 0, 0, 1, 2) as fc.Arbitrary<0 | 1 | 2>,
  finalNewline: fc.boolean(),
});

/** Mostly our running jobs, so most listings parse and span more than one block of lines. */
const startArb = fc.array(fc.constantFrom(0, 0, 2, 4, 6, 7), { minLength: 0, maxLength: 150 });

function apply(lines: number[], edit: Edit): void {
  const at = lines.length === 0 ? 0 : edit.at % (lines.length + (edit.kind === "insert" ? 1 : 0));
  if (edit.kind === "insert") lines.splice(at, 0, edit.line);
  else if (lines.length === 0) return;
  else if (edit.kind === "set") lines[at] = edit.line;
  else lines.splice(at, 1);
}

/** Each row of a parsed listing with the line it came from (ours: a record with our name). */
function rowsByLine(
  lines: readonly string[],
  rows: readonly QueueRow[],
  names: ReadonlySet<string> | undefined,
): Map<string, QueueRow> {
  const source = lines.filter(
    (l) => names === undefined || (/^[0-9]/.test(l) && names.has(l.split("|")[1] ?? "")),
  );
  expect(source).toHaveLength(rows.length);
  return new Map(source.map((l, i) => [l, rows[i] as QueueRow]));
}

describe("the squeue memo against the plain parser", () => {
  test("the same answers, the same row objects for lines that stayed, only the last listing kept", () => {
    const usual = new Set<string>(OURS);
    fc.assert(
      fc.property(startArb, fc.array(stepArb, { maxLength: 12 }), (start, steps) => {
        const memo = createSqueueMemo();
        const lines = [...start];
        let kept: readonly string[] = [];
        let rowsBefore = new Map<string, QueueRow>();
        const answers: [readonly QueueRow[], readonly QueueRow[]][] = [];
        for (const step of [{ edits: [], names: 0, finalNewline: true } as Step, ...steps]) {
          for (const edit of step.edits) apply(lines, edit);
          const names = [usual, new Set<string>(OURS), undefined][step.names];
          const text = lines.map((l) => POOL[l] as string).join("\n");
          const listing = lines.length > 0 && step.finalNewline ? `${text}\n` : text;
          const plain = parseSqueue(listing, undefined, names);
          const memoed = parseSqueue(listing, memo, names);
          expect(memoed).toEqual(plain);
          // An answer already given is never changed under its holder (the feed diffs by it).
          for (const [given, copy] of answers) expect(given).toEqual(copy);
          if (memoed.kind === "Parsed") {
            answers.push([memoed.value, [...memoed.value]]);
            // A patch says truly where its answer differs from the one it was made from.
            const patch = memo.patched;
            if (patch !== null) {
              expect(patch.to).toBe(memoed.value);
              expect(patch.to).toHaveLength(patch.from.length);
              const differ = patch.to.flatMap((r, i) => (r === patch.from[i] ? [] : [i]));
              expect([...patch.indices].sort((a, b) => a - b)).toEqual(differ);
            }
            // As the parser reads it: no line after a final newline (nor in an empty text).
            kept = listing === "" ? [] : listing.replace(/\n$/, "").split("\n");
            const now = rowsByLine(kept, memoed.value, names);
            for (const [line, r] of now) {
              if (rowsBefore.has(line)) expect(r).toBe(rowsBefore.get(line) as QueueRow);
            }
            rowsBefore = now;
          }
          expect(new Set(memo.byLine.keys())).toEqual(new Set(kept));
        }
      }),
      { numRuns: 600 },
    );
  });
});
