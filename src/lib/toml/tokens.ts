/**
 * The TOML subset's keys (bare, quoted, dotted) and scalar values: strings, integers the
 * readers hold exactly, booleans. Floats, dates, arrays and inline tables are refused by name.
 */
import { type Cursor, describeChar, here, refuse, skipSpaces } from "./cursor.ts";
import { basicString, literalString, multilineBasic, multilineLiteral } from "./strings.ts";
import type { TomlScalar } from "./subset.ts";

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

export function simpleKey(c: Cursor): string {
  const ch = c.text[c.pos];
  if (ch === '"') {
    if (c.text.startsWith('"""', c.pos)) throw refuse(c, "a multi-line string cannot be a key");
    return basicString(c, null);
  }
  if (ch === "'") {
    if (c.text.startsWith("'''", c.pos)) throw refuse(c, "a multi-line string cannot be a key");
    return literalString(c, null);
  }
  const start = c.pos;
  while (c.pos < c.text.length && BARE_KEY_CHAR.test(c.text[c.pos] ?? "")) c.pos += 1;
  if (c.pos === start) throw refuse(c, `expected a key, found ${describeChar(ch)}`);
  return c.text.slice(start, c.pos);
}

export function keyPath(c: Cursor): string[] {
  const parts = [simpleKey(c)];
  for (;;) {
    const save = c.pos;
    skipSpaces(c);
    if (c.text[c.pos] !== ".") {
      c.pos = save;
      return parts;
    }
    c.pos += 1;
    skipSpaces(c);
    parts.push(simpleKey(c));
  }
}

export function scalar(c: Cursor, key: string): TomlScalar {
  const ch = c.text[c.pos];
  if (ch === '"')
    return c.text.startsWith('"""', c.pos) ? multilineBasic(c, key) : basicString(c, key);
  if (ch === "'")
    return c.text.startsWith("'''", c.pos) ? multilineLiteral(c, key) : literalString(c, key);
  if (ch === "[") {
    throw refuse(c, `${key}: arrays are not accepted (only strings, integers, booleans)`, key);
  }
  if (ch === "{") {
    throw refuse(c, `${key}: inline tables are not accepted: write a [table] header`, key);
  }
  const start = here(c);
  VALUE_TOKEN.lastIndex = c.pos;
  const token = VALUE_TOKEN.exec(c.text)?.[0] ?? "";
  if (token === "") throw refuse(c, `${key}: expected a value, found ${describeChar(ch)}`, key);
  if (token === "true" || token === "false") {
    c.pos += token.length;
    return token === "true";
  }
  if (DATE_OR_TIME.test(token)) {
    throw refuse(c, `${key}: dates and times are not accepted`, key, start);
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
        c,
        `${key}: ${token} is beyond the integers a reader can hold exactly`,
        key,
        start,
      );
    }
    c.pos += token.length;
    return value === 0 ? 0 : value; // -0 reads as 0 in both other readers
  }
  if (FLOAT.test(token)) {
    throw refuse(c, `${key}: ${token} is a float; only integers are accepted`, key, start);
  }
  if (/^[+-]?[0-9]/.test(token)) {
    throw refuse(
      c,
      `${key}: ${token} is not a TOML integer (no leading zeros, _ only between digits, lowercase 0x/0o/0b prefixes without a sign)`,
      key,
      start,
    );
  }
  throw refuse(c, `${key}: ${token} is not a value (strings need quotes)`, key, start);
}

function integerValue(token: string): number {
  const digits = token.replaceAll("_", "");
  if (digits.startsWith("0x")) return Number.parseInt(digits.slice(2), 16);
  if (digits.startsWith("0o")) return Number.parseInt(digits.slice(2), 8);
  if (digits.startsWith("0b")) return Number.parseInt(digits.slice(2), 2);
  return Number(digits);
}
