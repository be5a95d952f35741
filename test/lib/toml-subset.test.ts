import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { parse as smolParse } from "smol-toml";
import { readTomlSubset, toPlain } from "../../src/lib/toml/cross-check.ts";
import { parseTomlSubset } from "../../src/lib/toml/subset.ts";

// ---------------------------------------------------------------------------------------------
// Generated documents inside the accepted subset: every piece carries its TOML text and the
// value it must read as, so all three readers are checked against what was meant, not only
// against each other.
// ---------------------------------------------------------------------------------------------

interface Piece {
  readonly text: string;
  readonly value: string;
}

/** Plain data: smol-toml returns null-prototype objects, which toEqual would tell apart. */
function plain(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = plain(v);
  return out;
}

const PLAIN_CHARS = [..."abcxyzABCXYZ0189 .,;:-_/#=[]{}@!?()+*&%$~`|<>é中😀\u00a0"];
const plainChar = fc.constantFrom(...PLAIN_CHARS);

function hex(n: number, width: number, upper: boolean): string {
  const h = n.toString(16).padStart(width, "0");
  return upper ? h.toUpperCase() : h;
}

const scalarBmp = fc.integer({ min: 0, max: 0xffff }).filter((c) => c < 0xd800 || c > 0xdfff);
const scalarAny = fc.integer({ min: 0, max: 0x10ffff }).filter((c) => c < 0xd800 || c > 0xdfff);

/** TOML 1.0 escapes in a basic string, each with the character it stands for. */
const escapePiece: fc.Arbitrary<Piece> = fc.oneof(
  fc.constantFrom<Piece>(
    { text: "\\b", value: "\b" },
    { text: "\\t", value: "\t" },
    { text: "\\n", value: "\n" },
    { text: "\\f", value: "\f" },
    { text: "\\r", value: "\r" },
    { text: '\\"', value: '"' },
    { text: "\\\\", value: "\\" },
  ),
  fc
    .tuple(scalarBmp, fc.boolean())
    .map(([c, upper]) => ({ text: `\\u${hex(c, 4, upper)}`, value: String.fromCodePoint(c) })),
  fc
    .tuple(scalarAny, fc.boolean())
    .map(([c, upper]) => ({ text: `\\U${hex(c, 8, upper)}`, value: String.fromCodePoint(c) })),
);

const rawPiece = (chars: fc.Arbitrary<string>): fc.Arbitrary<Piece> =>
  chars.map((c) => ({ text: c, value: c }));

const basicPiece = fc.oneof(
  { weight: 3, arbitrary: rawPiece(fc.oneof(plainChar, fc.constantFrom("'", "\t"))) },
  { weight: 2, arbitrary: escapePiece },
);

const join = (pieces: readonly Piece[]): Piece => ({
  text: pieces.map((p) => p.text).join(""),
  value: pieces.map((p) => p.value).join(""),
});

const basicString = fc
  .array(basicPiece, { maxLength: 12 })
  .map((ps) => join(ps))
  .map((p) => ({ text: `"${p.text}"`, value: p.value }));

const literalString = fc
  .array(fc.oneof(plainChar, fc.constantFrom('"', "\\", "\t")), { maxLength: 12 })
  .map((cs) => ({ text: `'${cs.join("")}'`, value: cs.join("") }));

const NEWLINE: Piece = { text: "\n", value: "\n" };

/**
 * Multi-line strings: raw newlines, raw runs of one or two delimiter quotes (never two runs
 * side by side: that would be three), and for basic strings the line-ending backslash,
 * which trims everything blank after it (so what follows it must not be blank).
 */
function multiline(quote: '"' | "'"): fc.Arbitrary<Piece> {
  const quotes = fc.constantFrom<Piece>(
    { text: quote, value: quote },
    { text: quote.repeat(2), value: quote.repeat(2) },
  );
  const trim = fc
    .tuple(
      fc.constantFrom("", " ", "\t "),
      fc.array(fc.constantFrom(" ", "\t", "\n"), { maxLength: 4 }),
    )
    .map(([before, after]) => ({ text: `\\${before}\n${after.join("")}`, value: "", trim: true }));
  const content =
    quote === '"'
      ? fc.oneof(
          { weight: 4, arbitrary: basicPiece.map((p) => ({ ...p, trim: false })) },
          { weight: 1, arbitrary: fc.constant({ ...NEWLINE, trim: false }) },
          { weight: 1, arbitrary: quotes.map((p) => ({ ...p, trim: false })) },
          { weight: 1, arbitrary: trim },
        )
      : fc.oneof(
          {
            weight: 4,
            arbitrary: rawPiece(fc.oneof(plainChar, fc.constantFrom('"', "\\", "\t"))).map((p) => ({
              ...p,
              trim: false,
            })),
          },
          { weight: 1, arbitrary: fc.constant({ ...NEWLINE, trim: false }) },
          { weight: 1, arbitrary: quotes.map((p) => ({ ...p, trim: false })) },
        );
  return fc
    .tuple(fc.array(content, { maxLength: 10 }), fc.boolean())
    .filter(([pieces, leadingNewline]) =>
      pieces.every((p, i) => {
        const next = pieces[i + 1];
        if (p.text.startsWith(quote) && next?.text.startsWith(quote)) return false;
        if (p.trim && next !== undefined && /^[ \t\n]/.test(next.text)) return false;
        // Outside the subset: the two readers read a line-ending backslash followed by the
        // closing delimiter with extra quotes differently (refusal tested below).
        if (p.trim && next?.text.startsWith(quote) && i + 2 === pieces.length) return false;
        // Without the trimmed leading newline, a first raw newline would be trimmed instead.
        if (i === 0 && !leadingNewline && p.text.startsWith("\n")) return false;
        return true;
      }),
    )
    .map(([pieces, leadingNewline]) => {
      const body = join(pieces);
      const delim = quote.repeat(3);
      return {
        text: `${delim}${leadingNewline ? "\n" : ""}${body.text}${delim}`,
        value: body.value,
      };
    });
}

function underscored(digits: string, unders: readonly boolean[]): string {
  let out = digits[0] ?? "";
  for (let i = 1; i < digits.length; i += 1) {
    out += `${unders[i] ? "_" : ""}${digits[i]}`;
  }
  return out;
}

const anySafeInteger = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }),
  fc.maxSafeInteger(),
  fc.maxSafeNat().map((n) => -n),
);

interface Scalar {
  readonly text: string;
  readonly value: string | number | boolean;
}

const decimalInteger: fc.Arbitrary<Scalar> = fc
  .tuple(anySafeInteger, fc.boolean(), fc.array(fc.boolean(), { maxLength: 20 }))
  .map(([n, plus, unders]) => {
    const sign = n < 0 ? "-" : plus ? "+" : "";
    return { text: `${sign}${underscored(String(Math.abs(n)), unders)}`, value: n === 0 ? 0 : n };
  });

const radixInteger: fc.Arbitrary<Scalar> = fc
  .tuple(
    fc.oneof(fc.integer({ min: 0, max: 4096 }), fc.maxSafeNat()),
    fc.constantFrom(
      { prefix: "0x", radix: 16 },
      { prefix: "0o", radix: 8 },
      { prefix: "0b", radix: 2 },
    ),
    fc.boolean(),
    fc.integer({ min: 0, max: 2 }),
    fc.array(fc.boolean(), { maxLength: 60 }),
  )
  .map(([n, { prefix, radix }, upper, zeros, unders]) => {
    let digits = "0".repeat(zeros) + n.toString(radix);
    if (upper) digits = digits.toUpperCase();
    return { text: `${prefix}${underscored(digits, unders)}`, value: n };
  });

const scalar: fc.Arbitrary<Scalar> = fc.oneof(
  fc.constantFrom<Scalar>({ text: "true", value: true }, { text: "false", value: false }),
  decimalInteger,
  radixInteger,
  basicString,
  literalString,
  multiline('"'),
  multiline("'"),
);

// Keys: bare when the name allows it, otherwise (or by choice) quoted.

const keyChar = fc.oneof(plainChar, fc.constantFrom(".", '"', "'", "\\", "\t"));
const keyName = fc.oneof(
  { weight: 3, arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,6}$/) },
  { weight: 2, arbitrary: fc.array(keyChar, { maxLength: 6 }).map((cs) => cs.join("")) },
  // Quoted dotted keys stay one key.
  { weight: 1, arbitrary: fc.constantFrom("a.b", "gpu.a100", ".", "x..y") },
);

type KeyStyle = "bare" | "basic" | "literal";

function renderKey(name: string, style: KeyStyle): string {
  if (style === "bare" && /^[A-Za-z0-9_-]+$/.test(name)) return name;
  if (style === "literal" && !/['\u0000-\u001f\u007f]/.test(name)) return `'${name}'`;
  let out = "";
  for (const ch of name) {
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\t") out += "\\t";
    else out += ch;
  }
  return `"${out}"`;
}

interface Key {
  readonly name: string;
  readonly text: string;
}

const key: fc.Arbitrary<Key> = fc
  .tuple(keyName, fc.constantFrom<KeyStyle>("bare", "basic", "literal"))
  .map(([name, style]) => ({ name, text: renderKey(name, style) }));

interface Entry {
  readonly key: Key;
  readonly value: Scalar;
}

interface Table {
  readonly path: readonly Key[];
  readonly entries: readonly Entry[];
}

const entries = fc.uniqueArray(fc.record({ key, value: scalar }), {
  maxLength: 5,
  selector: (e) => e.key.name,
});

interface Decor {
  readonly indent: string;
  readonly aroundEquals: readonly [string, string];
  readonly comment: string | null;
  readonly blankBefore: boolean;
}

const decor: fc.Arbitrary<Decor> = fc.record({
  indent: fc.constantFrom("", "", " ", "\t", "  "),
  aroundEquals: fc.tuple(fc.constantFrom(" ", "", "\t"), fc.constantFrom(" ", "", "  ")),
  comment: fc.option(
    fc
      .array(fc.oneof(plainChar, fc.constantFrom("#", "'", '"')), { maxLength: 10 })
      .map((cs) => `#${cs.join("")}`),
  ),
  blankBefore: fc.boolean(),
});

interface Document {
  /** Statement chunks (each ends with its line ending); blank and comment lines included. */
  readonly chunks: readonly string[];
  readonly text: string;
  readonly expected: Record<string, unknown>;
}

const document: fc.Arbitrary<Document> = fc
  .record({
    root: entries,
    tables: fc.uniqueArray(
      fc.record({ path: fc.array(key, { minLength: 1, maxLength: 3 }), entries }),
      { maxLength: 4, selector: (t) => JSON.stringify(t.path.map((k) => k.name)) },
    ),
    decors: fc.infiniteStream(decor),
    crlf: fc.boolean(),
  })
  .map(({ root, tables, decors, crlf }) => {
    const eol = crlf ? "\r\n" : "\n";
    const names = (path: readonly Key[]) => path.map((k) => k.name);
    // Keys that would collide with a table a header defines below them are dropped: the
    // generator stays inside valid TOML (the parser's refusals are tested separately).
    const childNames = (prefix: readonly string[]): Set<string> => {
      const out = new Set<string>();
      for (const t of tables) {
        const p = names(t.path);
        if (p.length > prefix.length && prefix.every((n, i) => p[i] === n)) {
          out.add(p[prefix.length] as string);
        }
      }
      return out;
    };
    const keep = (es: readonly Entry[], prefix: readonly string[]) => {
      const taken = childNames(prefix);
      return es.filter((e) => !taken.has(e.key.name));
    };
    const chunks: string[] = [];
    const expected: Record<string, unknown> = {};
    const emit = (line: string) => {
      const d = decors.next().value as Decor;
      if (d.blankBefore) chunks.push(eol);
      chunks.push(`${d.indent}${line}${d.comment === null ? "" : ` ${d.comment}`}${eol}`);
    };
    const emitEntries = (es: readonly Entry[], target: Record<string, unknown>) => {
      for (const e of es) {
        const d = decors.next().value as Decor;
        emit(`${e.key.text}${d.aroundEquals[0]}=${d.aroundEquals[1]}${e.value.text}`);
        target[e.key.name] = e.value.value;
      }
    };
    emitEntries(keep(root, []), expected);
    const tableAt = (path: readonly string[]): Record<string, unknown> => {
      let t = expected;
      for (const n of path) {
        t[n] ??= {};
        t = t[n] as Record<string, unknown>;
      }
      return t;
    };
    for (const table of tables as readonly Table[]) {
      const d = decors.next().value as Decor;
      const dot = d.aroundEquals[0] === "\t" ? " . " : ".";
      emit(`[${d.aroundEquals[1]}${table.path.map((k) => k.text).join(dot)}${d.aroundEquals[1]}]`);
      emitEntries(keep(table.entries, names(table.path)), tableAt(names(table.path)));
    }
    return { chunks, text: chunks.join(""), expected };
  });

const RUNS = { numRuns: 300 };

describe("inside the subset: the loader, smol-toml and Bun's reader read what was written", () => {
  test("generated documents (quoted dotted keys, escapes, odd integer spellings, multi-line strings)", () => {
    fc.assert(
      fc.property(document, (doc) => {
        const ours = readTomlSubset(doc.text);
        if (ours.kind !== "Parsed") {
          throw new Error(`refused: ${JSON.stringify(ours)}\n${JSON.stringify(doc.text)}`);
        }
        expect(toPlain(ours.root)).toEqual(doc.expected);
        expect(plain(smolParse(doc.text))).toEqual(doc.expected);
        expect(plain(Bun.TOML.parse(doc.text))).toEqual(doc.expected);
      }),
      RUNS,
    );
  });

  test("the examples the seeds name", () => {
    const text = [
      '"a.b" = 1',
      '[profiles."gpu.a100"]',
      'esc = "tab\\tnl\\nq\\"bs\\\\u\\u00e9U\\U0001F600"',
      "plus = +1",
      "under = 1_000",
      "hex = 0x1F",
      "oct = 0o17",
      "bin = 0b101",
      "neg = -0",
      "",
    ].join("\n");
    const expected = {
      "a.b": 1,
      profiles: {
        "gpu.a100": {
          esc: 'tab\tnl\nq"bs\\uéU😀',
          plus: 1,
          under: 1000,
          hex: 31,
          oct: 15,
          bin: 5,
          neg: 0,
        },
      },
    };
    const ours = readTomlSubset(text);
    expect(ours.kind).toBe("Parsed");
    if (ours.kind === "Parsed") expect(toPlain(ours.root)).toEqual(expected);
    expect(plain(smolParse(text))).toEqual(expected);
    expect(plain(Bun.TOML.parse(text))).toEqual(expected);
  });
});

// ---------------------------------------------------------------------------------------------
// Outside the subset: a bad line planted between the statements of a valid document is refused
// at exactly its line.
// ---------------------------------------------------------------------------------------------

const BAD_LINES: readonly (readonly [string, RegExp])[] = [
  ["zzbad = 1.5", /float/],
  ["zzbad = 1e3", /float/],
  ["zzbad = -0.0", /float/],
  ["zzbad = 6.02e23", /float/],
  ["zzbad = 1_000.5", /float/],
  ["zzbad = inf", /float/],
  ["zzbad = -nan", /float/],
  ["zzbad = [1, 2]", /arrays/],
  ["zzbad = []", /arrays/],
  ['zzbad = ["BATCH"]', /arrays/],
  ["zzbad = { a = 1 }", /inline tables/],
  ["zzbad = 1979-05-27", /dates/],
  ["zzbad = 1979-05-27T07:32:00Z", /dates/],
  ["zzbad = 1979-05-27 07:32:00", /dates/],
  ["zzbad = 07:32:00", /dates/],
  ["[[zzbad]]", /arrays of tables/],
  ["zz.bad = 1", /dotted key/],
  ['zzbad = "\\e"', /escape \\e/],
  ['zzbad = "\\x41"', /escape \\x/],
  ['zzbad = "\\q"', /escape \\q/],
  ['zzbad = "\\uD800"', /scalar/],
  ["zzbad = 007", /not a TOML integer/],
  ["zzbad = 1__0", /not a TOML integer/],
  ["zzbad = 0X1F", /not a TOML integer/],
  ["zzbad = +0x1F", /not a TOML integer/],
  ["zzbad = 1_", /not a TOML integer/],
  ["zzbad = 0x", /not a TOML integer/],
  ["zzbad = 9007199254740992", /beyond/],
  ["zzbad = yes", /not a value/],
  ['zzbad = """x\r\ny"""', /CRLF/],
  ['zzbad = """x\\\n""""', /line-ending backslash/],
];

describe("outside the subset: the loader refuses with the line", () => {
  test("a non-subset line planted anywhere in a generated document", () => {
    fc.assert(
      fc.property(
        document.filter((d) => !d.text.includes("zz")),
        fc.nat(),
        fc.constantFrom(...BAD_LINES),
        (doc, at, [bad, why]) => {
          const index = at % (doc.chunks.length + 1);
          const before = doc.chunks.slice(0, index).join("");
          const line = before.split("\n").length;
          const text = `${before}${bad}\n${doc.chunks.slice(index).join("")}`;
          const read = readTomlSubset(text);
          if (read.kind !== "Refused") throw new Error(`accepted: ${JSON.stringify(text)}`);
          expect(read.line).toBe(line);
          expect(read.message).toMatch(why);
        },
      ),
      RUNS,
    );
  });

  test("each refusal names its key", () => {
    for (const [bad] of BAD_LINES) {
      const read = readTomlSubset(`[profiles.p]\n${bad}\n`);
      expect(read.kind).toBe("Refused");
      if (read.kind !== "Refused") continue;
      expect(read.line).toBe(2);
      expect(read.key ?? "").toMatch(/zz/);
      expect(read.message).toContain(read.key ?? "?");
    }
  });

  test.each([
    ["duplicate key", "a = 1\nb = 2\na = 3\n", 3, /duplicate key/],
    ["table defined twice", "[a]\nx = 1\n[b]\n[a]\n", 4, /defined twice/],
    ["a value used as a table", "a = 1\n[a.b]\n", 2, /already a value/],
    ["a key after a value on one line", "a = 1 2\n", 1, /unexpected/],
    ["an unterminated string", 'a = "x\nb = 1\n', 1, /unterminated/],
    ["an unterminated multi-line string", 'a = """x\nb = 1\n', 3, /unterminated/],
    ["a control character in a comment", "a = 1 # \u0001\n", 1, /control character/],
    ["a raw control character in a string", 'a = "\u0007"\n', 1, /control character/],
    ["a bare carriage return", "a = 1\rb = 2\n", 1, /carriage return/],
    ["a missing =", "a 1\n", 1, /expected =/],
    ["six quotes in a row", 'a = """x""""""\n', 1, /in a row/],
  ])("%s", (_label, text, line, why) => {
    const read = readTomlSubset(text);
    expect(read.kind).toBe("Refused");
    if (read.kind === "Refused") {
      expect(read.line).toBe(line);
      expect(read.message).toMatch(why);
    }
  });

  test("positions are 1-based lines and columns of the offending token", () => {
    const read = readTomlSubset("[t]\n\n  gpus =   1.5\n");
    expect(read).toMatchObject({ kind: "Refused", line: 3, column: 12, key: "t.gpus" });
  });

  test("a lone surrogate is refused with its line", () => {
    const read = readTomlSubset('a = 1\nb = "\ud800"\n');
    expect(read).toMatchObject({ kind: "Refused", line: 2 });
  });

  test("keys named like Object.prototype's are plain keys in all three readers", () => {
    const read = readTomlSubset('"__proto__" = 1\n[constructor]\ntoString = "x"\n');
    if (read.kind !== "Parsed") throw new Error(read.message);
    expect(Object.keys(toPlain(read.root))).toEqual(["__proto__", "constructor"]);
    expect(Object.getPrototypeOf(toPlain(read.root))).toBe(Object.prototype);
  });

  test("a leading byte-order mark is skipped, as both readers do", () => {
    const read = readTomlSubset("\uFEFFa = 1\n");
    expect(read.kind).toBe("Parsed");
  });
});

describe("the subset parser alone", () => {
  test("keeps the position of every key and header", () => {
    const parsed = parseTomlSubset('top = "x"\n\n[t.u]\n  k = 1\n');
    if (parsed.kind !== "Parsed") throw new Error("refused");
    const top = parsed.root.entries.get("top");
    expect(top?.position).toEqual({ line: 1, column: 1 });
    const t = parsed.root.entries.get("t");
    const u = t?.kind === "table" ? t.entries.get("u") : undefined;
    expect(u?.position).toEqual({ line: 3, column: 1 });
    const k = u?.kind === "table" ? u.entries.get("k") : undefined;
    expect(k?.position).toEqual({ line: 4, column: 3 });
  });

  test("an implied table may be defined later, once", () => {
    expect(parseTomlSubset("[a.b]\n[a]\nx = 1\n").kind).toBe("Parsed");
    expect(parseTomlSubset("[a.b]\n[a]\n[a]\n").kind).toBe("Refused");
  });
});
