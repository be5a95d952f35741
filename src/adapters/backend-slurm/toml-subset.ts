/**
 * The strict TOML subset `cluster.toml` is written in: tables, strings, integers and
 * booleans. Anything else (floats, arrays, inline tables, arrays of tables, dates and times,
 * dotted keys on key/value lines, TOML 1.1 escapes) is refused with its line, never guessed
 * at: failing to read is recoverable, misreading schedules onto the wrong queue.
 *
 * This is the reader that knows where every key is, so every refusal has a line. Files are
 * read through the cross-check (toml-cross-check.ts), which has two more readers agree.
 */

export type TomlScalar = string | number | boolean;

/** 1-based, like an editor's status line. */
export interface TomlPosition {
  readonly line: number;
  readonly column: number;
}

export interface TomlValueNode {
  readonly kind: "value";
  readonly value: TomlScalar;
  /** Where its key is written. */
  readonly position: TomlPosition;
}

export interface TomlTableNode {
  readonly kind: "table";
  /** In definition order. */
  readonly entries: ReadonlyMap<string, TomlNode>;
  /** The header that defined it, or where it was first implied (`[a.b]` implies `a`). */
  readonly position: TomlPosition;
}

export type TomlNode = TomlValueNode | TomlTableNode;

export type TomlRefusal = {
  readonly kind: "Refused";
  readonly line: number;
  readonly column: number | null;
  /** The dotted path of the offending key, when there is one. */
  readonly key: string | null;
  readonly message: string;
};

export type SubsetParse = { readonly kind: "Parsed"; readonly root: TomlTableNode } | TomlRefusal;

// ---------------------------------------------------------------------------------------------
// The subset parser
// ---------------------------------------------------------------------------------------------

interface MutableTable {
  readonly kind: "table";
  readonly entries: Map<string, MutableTable | TomlValueNode>;
  position: TomlPosition;
  /** Defined by its own header (a second header for it is a redefinition). */
  explicit: boolean;
}

/** A statement (header or key/value line) and where the text after it begins. */
export interface Statement {
  readonly position: TomlPosition;
  readonly end: number;
}

// Thrown inside the parser only, caught by parseTomlSubset: a refusal deep inside a string
// escape would otherwise have to be threaded through every function as a result value.
class Refusal {
  constructor(
    readonly position: TomlPosition,
    readonly key: string | null,
    readonly message: string,
  ) {}
}

const BARE_KEY_CHAR = /[A-Za-z0-9_-]/;
const DECIMAL_INTEGER = /^[+-]?(?:0|[1-9](?:_?[0-9])*)$/;
const HEX_INTEGER = /^0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*$/;
const OCTAL_INTEGER = /^0o[0-7](?:_?[0-7])*$/;
const BINARY_INTEGER = /^0b[01](?:_?[01])*$/;
const FLOAT =
  /^[+-]?(?:inf|nan|(?:0|[1-9](?:_?[0-9])*)(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?)$/;
const DATE_OR_TIME = /^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{2}:[0-9]{2})/;
/** The characters a number, boolean, date or bare word can be made of. */
const VALUE_TOKEN = /[A-Za-z0-9_+.:-]*/y;
/** TOML 1.0's escapes. `\e` and `\xHH` are TOML 1.1: TOML 1.0 readers refuse them. */
const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  b: "\b",
  t: "\t",
  n: "\n",
  f: "\f",
  r: "\r",
  '"': '"',
  "\\": "\\",
};

/** TOML forbids control characters other than tab in strings and comments. */
function isControl(code: number): boolean {
  return code !== 0x09 && (code < 0x20 || code === 0x7f);
}

function describeChar(ch: string | undefined): string {
  if (ch === undefined) return "end of file";
  if (ch === "\n") return "end of line";
  const code = ch.codePointAt(0) ?? 0;
  if (code < 0x20 || code === 0x7f) return `control character U+${hex4(code)}`;
  return JSON.stringify(ch);
}

function hex4(code: number): string {
  return code.toString(16).toUpperCase().padStart(4, "0");
}

export function joinKey(parts: readonly string[]): string {
  return parts.map((p) => (/^[A-Za-z0-9_-]+$/.test(p) ? p : JSON.stringify(p))).join(".");
}

/**
 * Parses the subset alone, with a position for every key and every refusal. `statements`
 * receives each header and key/value line (for locating what another reader refuses).
 */
export function parseWithStatements(
  source: string,
  statements: Statement[],
): { readonly kind: "Parsed"; readonly root: MutableTable } | TomlRefusal {
  // A leading byte-order mark is skipped: both other readers skip it too, and editors add it.
  const text = source.startsWith("\uFEFF") ? source.slice(1) : source;
  let pos = 0;
  let line = 1;
  let lineStart = 0;
  const root: MutableTable = {
    kind: "table",
    entries: new Map(),
    position: { line: 1, column: 1 },
    explicit: true,
  };
  let current = root;
  let currentPath: readonly string[] = [];

  const here = (): TomlPosition => ({ line, column: pos - lineStart + 1 });
  // Every refusal about a value names its key, whichever helper noticed the problem.
  const refuse = (message: string, key: string | null = null, at: TomlPosition = here()) =>
    new Refusal(
      at,
      key,
      key === null || message.startsWith(`${key}:`) ? message : `${key}: ${message}`,
    );

  function newline(): void {
    if (text[pos] === "\r" && text[pos + 1] === "\n") pos += 2;
    else if (text[pos] === "\n") pos += 1;
    else throw refuse("a bare carriage return is not a line ending: use LF or CRLF");
    line += 1;
    lineStart = pos;
  }

  function skipSpaces(): void {
    while (text[pos] === " " || text[pos] === "\t") pos += 1;
  }

  function comment(): void {
    // At '#': to the end of the line. TOML forbids control characters here as well.
    pos += 1;
    while (pos < text.length && text[pos] !== "\n" && text[pos] !== "\r") {
      if (isControl(text.charCodeAt(pos))) {
        throw refuse(`${describeChar(text[pos])} in a comment`);
      }
      pos += 1;
    }
  }

  function endOfLine(after: string, key: string | null): void {
    skipSpaces();
    if (text[pos] === "#") comment();
    if (pos >= text.length) return;
    if (text[pos] === "\n" || text[pos] === "\r") {
      newline();
      return;
    }
    throw refuse(`unexpected ${describeChar(text[pos])} after ${after}`, key);
  }

  function unicodeEscape(digits: number, key: string | null): string {
    const start = here();
    const hex = text.slice(pos, pos + digits);
    if (hex.length !== digits || !/^[0-9A-Fa-f]+$/.test(hex)) {
      throw refuse(`\\${digits === 4 ? "u" : "U"} needs ${digits} hex digits`, key, start);
    }
    const code = Number.parseInt(hex, 16);
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      throw refuse(`\\${digits === 4 ? "u" : "U"}${hex} is not a Unicode scalar value`, key, start);
    }
    pos += digits;
    return String.fromCodePoint(code);
  }

  function escapeSequence(key: string | null): string {
    // At the backslash.
    const at = here();
    pos += 1;
    const ch = text[pos];
    if (ch === undefined) throw refuse("unterminated string", key);
    const simple = SIMPLE_ESCAPES[ch];
    if (simple !== undefined) {
      pos += 1;
      return simple;
    }
    if (ch === "u" || ch === "U") {
      pos += 1;
      return unicodeEscape(ch === "u" ? 4 : 8, key);
    }
    throw refuse(
      `the escape \\${ch === "\n" || ch === "\r" ? "<newline>" : ch} is not accepted (TOML 1.0 escapes only: \\b \\t \\n \\f \\r \\" \\\\ \\uXXXX \\UXXXXXXXX)`,
      key,
      at,
    );
  }

  function basicString(key: string | null): string {
    pos += 1; // opening quote
    let out = "";
    for (;;) {
      const ch = text[pos];
      if (ch === undefined || ch === "\n" || ch === "\r") {
        throw refuse("unterminated string (a one-line string ends on its line)", key);
      }
      if (ch === '"') {
        pos += 1;
        return out;
      }
      if (ch === "\\") {
        out += escapeSequence(key);
        continue;
      }
      if (isControl(text.charCodeAt(pos))) {
        throw refuse(`${describeChar(ch)} in a string: escape it`, key);
      }
      out += ch;
      pos += 1;
    }
  }

  function literalString(key: string | null): string {
    pos += 1;
    const start = pos;
    for (;;) {
      const ch = text[pos];
      if (ch === undefined || ch === "\n" || ch === "\r") {
        throw refuse("unterminated string (a one-line string ends on its line)", key);
      }
      if (ch === "'") {
        pos += 1;
        return text.slice(start, pos - 1);
      }
      if (isControl(text.charCodeAt(pos))) {
        throw refuse(`${describeChar(ch)} in a string`, key);
      }
      pos += 1;
    }
  }

  /** At a run of delimiter quotes inside a multi-line string: content, close, or refuse. */
  function quoteRun(quote: string, key: string | null): { text: string; closed: boolean } {
    let n = 0;
    while (text[pos + n] === quote) n += 1;
    if (n < 3) {
      pos += n;
      return { text: quote.repeat(n), closed: false };
    }
    // One or two quotes may sit right before the closing three.
    if (n > 5) throw refuse(`${n} ${quote} in a row inside a multi-line string`, key);
    pos += n;
    return { text: quote.repeat(n - 3), closed: true };
  }

  /** A line break kept in a multi-line string's value. */
  function multilineNewline(key: string | null): string {
    if (text[pos] === "\r") {
      // Measured: smol-toml keeps "\r\n" in the value, Bun's reader turns it into "\n".
      throw refuse(
        "a multi-line string with CRLF line breaks reads differently in the two TOML readers (\\r\\n or \\n): save the file with LF line endings",
        key,
      );
    }
    newline();
    return "\n";
  }

  /** Right after a multi-line string's opening delimiter: a newline there is trimmed. */
  function trimOpeningNewline(): void {
    if (text[pos] === "\n" || (text[pos] === "\r" && text[pos + 1] === "\n")) newline();
  }

  function multilineBasic(key: string | null): string {
    const opened = here();
    pos += 3;
    trimOpeningNewline();
    let out = "";
    for (;;) {
      const ch = text[pos];
      if (ch === undefined) throw refuse("unterminated multi-line string", key);
      if (ch === '"') {
        const run = quoteRun('"', key);
        out += run.text;
        if (run.closed) return out;
        continue;
      }
      if (ch === "\\") {
        // A backslash ending a line trims it and all whitespace and newlines after it.
        let look = pos + 1;
        while (text[look] === " " || text[look] === "\t") look += 1;
        if (text[look] === "\n" || (text[look] === "\r" && text[look + 1] === "\n")) {
          pos = look;
          for (;;) {
            if (text[pos] === " " || text[pos] === "\t") pos += 1;
            else if (text[pos] === "\n" || text[pos] === "\r") newline();
            else break;
          }
          if (text.startsWith('""""', pos)) {
            // Measured: for `\<newline>""""` smol-toml drops the quote before the closing
            // delimiter and Bun's reader keeps it.
            throw refuse(
              'quotes right after a line-ending backslash and just before the closing """ read differently in the two TOML readers: escape them as \\"',
              key,
              opened,
            );
          }
          continue;
        }
        out += escapeSequence(key);
        continue;
      }
      if (ch === "\n" || ch === "\r") {
        out += multilineNewline(key);
        continue;
      }
      if (isControl(text.charCodeAt(pos))) {
        throw refuse(`${describeChar(ch)} in a string: escape it`, key);
      }
      out += ch;
      pos += 1;
    }
  }

  function multilineLiteral(key: string | null): string {
    pos += 3;
    trimOpeningNewline();
    let out = "";
    for (;;) {
      const ch = text[pos];
      if (ch === undefined) throw refuse("unterminated multi-line string", key);
      if (ch === "'") {
        const run = quoteRun("'", key);
        out += run.text;
        if (run.closed) return out;
        continue;
      }
      if (ch === "\n" || ch === "\r") {
        out += multilineNewline(key);
        continue;
      }
      if (isControl(text.charCodeAt(pos))) {
        throw refuse(`${describeChar(ch)} in a string`, key);
      }
      out += ch;
      pos += 1;
    }
  }

  function simpleKey(): string {
    const ch = text[pos];
    if (ch === '"') {
      if (text.startsWith('"""', pos)) throw refuse("a multi-line string cannot be a key");
      return basicString(null);
    }
    if (ch === "'") {
      if (text.startsWith("'''", pos)) throw refuse("a multi-line string cannot be a key");
      return literalString(null);
    }
    const start = pos;
    while (pos < text.length && BARE_KEY_CHAR.test(text[pos] ?? "")) pos += 1;
    if (pos === start) throw refuse(`expected a key, found ${describeChar(ch)}`);
    return text.slice(start, pos);
  }

  function keyPath(): string[] {
    const parts = [simpleKey()];
    for (;;) {
      const save = pos;
      skipSpaces();
      if (text[pos] !== ".") {
        pos = save;
        return parts;
      }
      pos += 1;
      skipSpaces();
      parts.push(simpleKey());
    }
  }

  function scalar(key: string): TomlScalar {
    const ch = text[pos];
    if (ch === '"') return text.startsWith('"""', pos) ? multilineBasic(key) : basicString(key);
    if (ch === "'") return text.startsWith("'''", pos) ? multilineLiteral(key) : literalString(key);
    if (ch === "[") {
      throw refuse(`${key}: arrays are not accepted (only strings, integers, booleans)`, key);
    }
    if (ch === "{") {
      throw refuse(`${key}: inline tables are not accepted: write a [table] header`, key);
    }
    const start = here();
    VALUE_TOKEN.lastIndex = pos;
    const token = VALUE_TOKEN.exec(text)?.[0] ?? "";
    if (token === "") throw refuse(`${key}: expected a value, found ${describeChar(ch)}`, key);
    if (token === "true" || token === "false") {
      pos += token.length;
      return token === "true";
    }
    if (DATE_OR_TIME.test(token)) {
      throw refuse(`${key}: dates and times are not accepted`, key, start);
    }
    if (
      DECIMAL_INTEGER.test(token) ||
      HEX_INTEGER.test(token) ||
      OCTAL_INTEGER.test(token) ||
      BINARY_INTEGER.test(token)
    ) {
      const value = integerValue(token);
      if (!Number.isSafeInteger(value)) {
        throw refuse(
          `${key}: ${token} is beyond the integers a reader can hold exactly`,
          key,
          start,
        );
      }
      pos += token.length;
      return value === 0 ? 0 : value; // -0 reads as 0 in both other readers
    }
    if (FLOAT.test(token)) {
      throw refuse(`${key}: ${token} is a float; only integers are accepted`, key, start);
    }
    if (/^[+-]?[0-9]/.test(token)) {
      throw refuse(
        `${key}: ${token} is not a TOML integer (no leading zeros, _ only between digits, lowercase 0x/0o/0b prefixes without a sign)`,
        key,
        start,
      );
    }
    throw refuse(`${key}: ${token} is not a value (strings need quotes)`, key, start);
  }

  function defineTable(parts: readonly string[], at: TomlPosition): void {
    let table = root;
    for (let i = 0; i < parts.length; i += 1) {
      const part = parts[i] as string;
      const path = joinKey(parts.slice(0, i + 1));
      const last = i === parts.length - 1;
      const existing = table.entries.get(part);
      if (existing === undefined) {
        const created: MutableTable = {
          kind: "table",
          entries: new Map(),
          position: at,
          explicit: last,
        };
        table.entries.set(part, created);
        table = created;
      } else if (existing.kind === "value") {
        throw refuse(
          `${path}: already a value (line ${existing.position.line}), so [${joinKey(parts)}] cannot be a table`,
          path,
          at,
        );
      } else {
        if (last) {
          if (existing.explicit) {
            throw refuse(
              `${path}: table [${path}] is defined twice (first at line ${existing.position.line})`,
              path,
              at,
            );
          }
          existing.explicit = true;
          existing.position = at;
        }
        table = existing;
      }
    }
    current = table;
    currentPath = parts;
  }

  try {
    while (pos < text.length) {
      skipSpaces();
      const ch = text[pos];
      if (ch === undefined) break;
      if (ch === "\n" || ch === "\r") {
        newline();
        continue;
      }
      if (ch === "#") {
        comment();
        if (pos < text.length) newline();
        continue;
      }
      const at = here();
      if (ch === "[") {
        if (text[pos + 1] === "[") {
          const end = text.indexOf("]]", pos);
          const newlineAt = text.indexOf("\n", pos);
          const name =
            end >= 0 && (newlineAt < 0 || end < newlineAt) ? text.slice(pos + 2, end).trim() : null;
          throw refuse(
            `arrays of tables ([[${name ?? "..."}]]) are not accepted: give each its own [table]`,
            name,
          );
        }
        pos += 1;
        skipSpaces();
        const parts = keyPath();
        skipSpaces();
        if (text[pos] !== "]") {
          throw refuse(`expected ] to close the table header, found ${describeChar(text[pos])}`);
        }
        pos += 1;
        endOfLine("the table header", joinKey(parts));
        defineTable(parts, at);
        statements.push({ position: at, end: pos });
        continue;
      }
      const parts = keyPath();
      const fullKey = joinKey([...currentPath, ...parts]);
      if (parts.length > 1) {
        throw refuse(
          `${fullKey}: the dotted key ${joinKey(parts)} is not accepted: write it under a [table] header (a quoted "a.b" key is one key)`,
          fullKey,
          at,
        );
      }
      skipSpaces();
      if (text[pos] !== "=") {
        throw refuse(`expected = after the key, found ${describeChar(text[pos])}`, fullKey);
      }
      pos += 1;
      skipSpaces();
      const value = scalar(fullKey);
      endOfLine("the value", fullKey);
      const name = parts[0] as string;
      const existing = current.entries.get(name);
      if (existing !== undefined) {
        throw refuse(
          `duplicate key (first defined at line ${existing.position.line})`,
          fullKey,
          at,
        );
      }
      current.entries.set(name, { kind: "value", value, position: at });
      statements.push({ position: at, end: pos });
    }
  } catch (error) {
    if (error instanceof Refusal) {
      return {
        kind: "Refused",
        line: error.position.line,
        column: error.position.column,
        key: error.key,
        message: error.message,
      };
    }
    throw error;
  }
  return { kind: "Parsed", root };
}

function integerValue(token: string): number {
  const digits = token.replaceAll("_", "");
  if (digits.startsWith("0x")) return Number.parseInt(digits.slice(2), 16);
  if (digits.startsWith("0o")) return Number.parseInt(digits.slice(2), 8);
  if (digits.startsWith("0b")) return Number.parseInt(digits.slice(2), 2);
  return Number(digits);
}

export function loneSurrogateIndex(text: string): number {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i += 1;
      else return i;
    } else if (code >= 0xdc00 && code <= 0xdfff) {
      return i;
    }
  }
  return text.length;
}

/** The subset parser on its own (no cross-check): positions for every key. */
export function parseTomlSubset(source: string): SubsetParse {
  return parseWithStatements(source, []);
}
