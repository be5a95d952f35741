/** `openai4s mcp`'s stdin in whole lines under a bound, whatever the chunking. */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { boundedLines } from "../../src/apps/cli/bounded-lines.ts";

async function through(max: number, chunks: readonly string[]) {
  const dropped: number[] = [];
  const stream = boundedLines(max, (n) => dropped.push(n));
  const lines: string[] = [];
  stream.on("data", (b: Buffer) => lines.push(b.toString()));
  for (const c of chunks) stream.write(Buffer.from(c));
  stream.end();
  await new Promise((r) => stream.on("end", r));
  return { lines, dropped };
}

describe("boundedLines", () => {
  test("a line of exactly the bound passes; one byte more is dropped, sized, and the next passes", async () => {
    const got = await through(4, ["abcd\nabcde\nxy", "z\n"]);
    expect(got).toEqual({ lines: ["abcd\n", "xyz\n"], dropped: [5] });
  });

  test("any chunking gives the same lines and drops", () => {
    fc.assert(
      fc.asyncProperty(
        fc.array(fc.stringMatching(/^[a-z]{0,12}$/), { maxLength: 8 }),
        fc.array(fc.nat(40), { maxLength: 6 }),
        async (lines, cuts) => {
          const text = lines.map((l) => `${l}\n`).join("");
          const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
          const chunks: string[] = [];
          let at = 0;
          for (const p of [...points, text.length]) {
            chunks.push(text.slice(at, p));
            at = p;
          }
          const got = await through(6, chunks);
          expect(got.lines).toEqual(lines.filter((l) => l.length <= 6).map((l) => `${l}\n`));
          expect(got.dropped).toEqual(lines.filter((l) => l.length > 6).map((l) => l.length));
        },
      ),
      { numRuns: 200 },
    );
  });
});
