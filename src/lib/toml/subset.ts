/**
 * The strict TOML subset `cluster.toml` is written in: tables, strings, integers and
 * booleans. Anything else (floats, arrays, inline tables, arrays of tables, dates and times,
 * dotted keys on key/value lines, TOML 1.1 escapes) is refused with its line, never guessed
 * at: failing to read is recoverable, misreading schedules onto the wrong queue.
 *
 * This is the reader that knows where every key is, so every refusal has a line. Files are
 * read through the cross-check (cross-check.ts), which has two more readers agree.
 * Its parts: cursor.ts (position, lines, comments), strings.ts, tokens.ts
 * (keys and scalar values); here, the statements and the tables they build.
 */
import {
  type Cursor,
  comment,
  createCursor,
  describeChar,
  endOfLine,
  here,
  newline,
  Refusal,
  refuse,
  skipSpaces,
  type TomlPosition,
} from "./cursor.ts";
import { keyPath, scalar } from "./tokens.ts";

export type TomlScalar = string | number | boolean;

// Where the cursor stands (cursor.ts); named here too, for the subset's readers.
export type { TomlPosition };

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

export function joinKey(parts: readonly string[]): string {
  return parts.map((p) => (/^[A-Za-z0-9_-]+$/.test(p) ? p : JSON.stringify(p))).join(".");
}

/** The tables built so far, and the one the key/value lines now go into. */
interface Tables {
  readonly root: MutableTable;
  current: MutableTable;
  currentPath: readonly string[];
}

function defineTable(c: Cursor, tables: Tables, parts: readonly string[], at: TomlPosition): void {
  let table = tables.root;
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
        c,
        `${path}: already a value (line ${existing.position.line}), so [${joinKey(parts)}] cannot be a table`,
        path,
        at,
      );
    } else {
      if (last) {
        if (existing.explicit) {
          throw refuse(
            c,
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
  tables.current = table;
  tables.currentPath = parts;
}

/** At `[`: a table header, which the lines after it go into. */
function tableHeader(c: Cursor, tables: Tables, at: TomlPosition): void {
  const { text } = c;
  if (text[c.pos + 1] === "[") {
    const end = text.indexOf("]]", c.pos);
    const newlineAt = text.indexOf("\n", c.pos);
    const name =
      end >= 0 && (newlineAt < 0 || end < newlineAt) ? text.slice(c.pos + 2, end).trim() : null;
    throw refuse(
      c,
      `arrays of tables ([[${name ?? "..."}]]) are not accepted: give each its own [table]`,
      name,
    );
  }
  c.pos += 1;
  skipSpaces(c);
  const parts = keyPath(c);
  skipSpaces(c);
  if (text[c.pos] !== "]") {
    throw refuse(c, `expected ] to close the table header, found ${describeChar(text[c.pos])}`);
  }
  c.pos += 1;
  endOfLine(c, "the table header", joinKey(parts));
  defineTable(c, tables, parts, at);
}

/** At a key: one `key = value` line, into the current table. */
function keyValueLine(c: Cursor, tables: Tables, at: TomlPosition): void {
  const parts = keyPath(c);
  const fullKey = joinKey([...tables.currentPath, ...parts]);
  if (parts.length > 1) {
    throw refuse(
      c,
      `${fullKey}: the dotted key ${joinKey(parts)} is not accepted: write it under a [table] header (a quoted "a.b" key is one key)`,
      fullKey,
      at,
    );
  }
  skipSpaces(c);
  if (c.text[c.pos] !== "=") {
    throw refuse(c, `expected = after the key, found ${describeChar(c.text[c.pos])}`, fullKey);
  }
  c.pos += 1;
  skipSpaces(c);
  const value = scalar(c, fullKey);
  endOfLine(c, "the value", fullKey);
  const name = parts[0] as string;
  const existing = tables.current.entries.get(name);
  if (existing !== undefined) {
    throw refuse(c, `duplicate key (first defined at line ${existing.position.line})`, fullKey, at);
  }
  tables.current.entries.set(name, { kind: "value", value, position: at });
}

/** Every statement of the text, in order, into `tables`; throws a Refusal at the first wrong one. */
function readStatements(c: Cursor, tables: Tables, statements: Statement[]): void {
  while (c.pos < c.text.length) {
    skipSpaces(c);
    const ch = c.text[c.pos];
    if (ch === undefined) break;
    if (ch === "\n" || ch === "\r") {
      newline(c);
      continue;
    }
    if (ch === "#") {
      comment(c);
      if (c.pos < c.text.length) newline(c);
      continue;
    }
    const at = here(c);
    if (ch === "[") tableHeader(c, tables, at);
    else keyValueLine(c, tables, at);
    statements.push({ position: at, end: c.pos });
  }
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
  const c = createCursor(source.startsWith("\uFEFF") ? source.slice(1) : source);
  const root: MutableTable = {
    kind: "table",
    entries: new Map(),
    position: { line: 1, column: 1 },
    explicit: true,
  };
  try {
    readStatements(c, { root, current: root, currentPath: [] }, statements);
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
