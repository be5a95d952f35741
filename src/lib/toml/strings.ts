/**
 * The TOML subset's strings: basic and literal, one-line and multi-line, with TOML 1.0's
 * escapes only. Where the two other readers of the cross-check were measured to disagree on a
 * string, it is refused with its line rather than read one way.
 */
import { type Cursor, describeChar, forbiddenControl, here, newline, refuse } from "./cursor.ts";

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

export function unicodeEscape(c: Cursor, digits: number, key: string | null): string {
  const start = here(c);
  const hex = c.text.slice(c.pos, c.pos + digits);
  if (hex.length !== digits || !/^[0-9A-Fa-f]+$/.test(hex)) {
    throw refuse(c, `\\${digits === 4 ? "u" : "U"} needs ${digits} hex digits`, key, start);
  }
  const code = Number.parseInt(hex, 16);
  if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
    throw refuse(
      c,
      `\\${digits === 4 ? "u" : "U"}${hex} is not a Unicode scalar value`,
      key,
      start,
    );
  }
  c.pos += digits;
  return String.fromCodePoint(code);
}

export function escapeSequence(c: Cursor, key: string | null): string {
  // At the backslash.
  const at = here(c);
  c.pos += 1;
  const ch = c.text[c.pos];
  if (ch === undefined) throw refuse(c, "unterminated string", key);
  const simple = SIMPLE_ESCAPES[ch];
  if (simple !== undefined) {
    c.pos += 1;
    return simple;
  }
  if (ch === "u" || ch === "U") {
    c.pos += 1;
    return unicodeEscape(c, ch === "u" ? 4 : 8, key);
  }
  throw refuse(
    c,
    `the escape \\${ch === "\n" || ch === "\r" ? "<newline>" : ch} is not accepted (TOML 1.0 escapes only: \\b \\t \\n \\f \\r \\" \\\\ \\uXXXX \\UXXXXXXXX)`,
    key,
    at,
  );
}

export function basicString(c: Cursor, key: string | null): string {
  c.pos += 1; // opening quote
  let out = "";
  for (;;) {
    const ch = c.text[c.pos];
    if (ch === undefined || ch === "\n" || ch === "\r") {
      throw refuse(c, "unterminated string (a one-line string ends on its line)", key);
    }
    if (ch === '"') {
      c.pos += 1;
      return out;
    }
    if (ch === "\\") {
      out += escapeSequence(c, key);
      continue;
    }
    if (forbiddenControl(c.text.charCodeAt(c.pos))) {
      throw refuse(c, `${describeChar(ch)} in a string: escape it`, key);
    }
    out += ch;
    c.pos += 1;
  }
}

export function literalString(c: Cursor, key: string | null): string {
  c.pos += 1;
  const start = c.pos;
  for (;;) {
    const ch = c.text[c.pos];
    if (ch === undefined || ch === "\n" || ch === "\r") {
      throw refuse(c, "unterminated string (a one-line string ends on its line)", key);
    }
    if (ch === "'") {
      c.pos += 1;
      return c.text.slice(start, c.pos - 1);
    }
    if (forbiddenControl(c.text.charCodeAt(c.pos))) {
      throw refuse(c, `${describeChar(ch)} in a string`, key);
    }
    c.pos += 1;
  }
}

/** At a run of delimiter quotes inside a multi-line string: content, close, or refuse. */
export function quoteRun(
  c: Cursor,
  quote: string,
  key: string | null,
): { text: string; closed: boolean } {
  let n = 0;
  while (c.text[c.pos + n] === quote) n += 1;
  if (n < 3) {
    c.pos += n;
    return { text: quote.repeat(n), closed: false };
  }
  // One or two quotes may sit right before the closing three.
  if (n > 5) throw refuse(c, `${n} ${quote} in a row inside a multi-line string`, key);
  c.pos += n;
  return { text: quote.repeat(n - 3), closed: true };
}

/** A line break kept in a multi-line string's value. */
export function multilineNewline(c: Cursor, key: string | null): string {
  if (c.text[c.pos] === "\r") {
    // Measured: smol-toml keeps "\r\n" in the value, Bun's reader turns it into "\n".
    throw refuse(
      c,
      "a multi-line string with CRLF line breaks reads differently in the two TOML readers (\\r\\n or \\n): save the file with LF line endings",
      key,
    );
  }
  newline(c);
  return "\n";
}

/** Right after a multi-line string's opening delimiter: a newline there is trimmed. */
export function trimOpeningNewline(c: Cursor): void {
  if (c.text[c.pos] === "\n" || (c.text[c.pos] === "\r" && c.text[c.pos + 1] === "\n")) newline(c);
}

export function multilineBasic(c: Cursor, key: string | null): string {
  const opened = here(c);
  c.pos += 3;
  trimOpeningNewline(c);
  let out = "";
  for (;;) {
    const ch = c.text[c.pos];
    if (ch === undefined) throw refuse(c, "unterminated multi-line string", key);
    if (ch === '"') {
      const run = quoteRun(c, '"', key);
      out += run.text;
      if (run.closed) return out;
      continue;
    }
    if (ch === "\\") {
      // A backslash ending a line trims it and all whitespace and newlines after it.
      let look = c.pos + 1;
      while (c.text[look] === " " || c.text[look] === "\t") look += 1;
      if (c.text[look] === "\n" || (c.text[look] === "\r" && c.text[look + 1] === "\n")) {
        c.pos = look;
        for (;;) {
          if (c.text[c.pos] === " " || c.text[c.pos] === "\t") c.pos += 1;
          else if (c.text[c.pos] === "\n" || c.text[c.pos] === "\r") newline(c);
          else break;
        }
        if (c.text.startsWith('""""', c.pos)) {
          // Measured: for `\<newline>""""` smol-toml drops the quote before the closing
          // delimiter and Bun's reader keeps it.
          throw refuse(
            c,
            'quotes right after a line-ending backslash and just before the closing """ read differently in the two TOML readers: escape them as \\"',
            key,
            opened,
          );
        }
        continue;
      }
      out += escapeSequence(c, key);
      continue;
    }
    if (ch === "\n" || ch === "\r") {
      out += multilineNewline(c, key);
      continue;
    }
    if (forbiddenControl(c.text.charCodeAt(c.pos))) {
      throw refuse(c, `${describeChar(ch)} in a string: escape it`, key);
    }
    out += ch;
    c.pos += 1;
  }
}

export function multilineLiteral(c: Cursor, key: string | null): string {
  c.pos += 3;
  trimOpeningNewline(c);
  let out = "";
  for (;;) {
    const ch = c.text[c.pos];
    if (ch === undefined) throw refuse(c, "unterminated multi-line string", key);
    if (ch === "'") {
      const run = quoteRun(c, "'", key);
      out += run.text;
      if (run.closed) return out;
      continue;
    }
    if (ch === "\n" || ch === "\r") {
      out += multilineNewline(c, key);
      continue;
    }
    if (forbiddenControl(c.text.charCodeAt(c.pos))) {
      throw refuse(c, `${describeChar(ch)} in a string`, key);
    }
    out += ch;
    c.pos += 1;
  }
}
