/**
 * Where the TOML subset reader is in its text, and what every part of it shares: the
 * position of a refusal, line endings, spaces, comments and the end of a statement's line.
 */

/** 1-based, like an editor's status line. */
export interface TomlPosition {
  readonly line: number;
  readonly column: number;
}

/** The reader's place: an index into the text, and the line it is on (for positions). */
export interface Cursor {
  readonly text: string;
  pos: number;
  line: number;
  lineStart: number;
}

export function createCursor(text: string): Cursor {
  return { text, pos: 0, line: 1, lineStart: 0 };
}

// Thrown inside the parser only, caught by parseWithStatements: a refusal deep inside a
// string escape would otherwise have to be threaded through every function as a result value.
export class Refusal {
  constructor(
    readonly position: TomlPosition,
    readonly key: string | null,
    readonly message: string,
  ) {}
}

export function here(c: Cursor): TomlPosition {
  return { line: c.line, column: c.pos - c.lineStart + 1 };
}

/** Every refusal about a value names its key, whichever helper noticed the problem. */
export function refuse(
  c: Cursor,
  message: string,
  key: string | null = null,
  at: TomlPosition = here(c),
): Refusal {
  return new Refusal(
    at,
    key,
    key === null || message.startsWith(`${key}:`) ? message : `${key}: ${message}`,
  );
}

/** TOML forbids control characters other than tab in strings and comments. */
export function forbiddenControl(code: number): boolean {
  return code !== 0x09 && (code < 0x20 || code === 0x7f);
}

export function describeChar(ch: string | undefined): string {
  if (ch === undefined) return "end of file";
  if (ch === "\n") return "end of line";
  const code = ch.codePointAt(0) ?? 0;
  if (code < 0x20 || code === 0x7f) return `control character U+${hex4(code)}`;
  return JSON.stringify(ch);
}

function hex4(code: number): string {
  return code.toString(16).toUpperCase().padStart(4, "0");
}

export function newline(c: Cursor): void {
  if (c.text[c.pos] === "\r" && c.text[c.pos + 1] === "\n") c.pos += 2;
  else if (c.text[c.pos] === "\n") c.pos += 1;
  else throw refuse(c, "a bare carriage return is not a line ending: use LF or CRLF");
  c.line += 1;
  c.lineStart = c.pos;
}

export function skipSpaces(c: Cursor): void {
  while (c.text[c.pos] === " " || c.text[c.pos] === "\t") c.pos += 1;
}

export function comment(c: Cursor): void {
  // At '#': to the end of the line. TOML forbids control characters here as well.
  c.pos += 1;
  while (c.pos < c.text.length && c.text[c.pos] !== "\n" && c.text[c.pos] !== "\r") {
    if (forbiddenControl(c.text.charCodeAt(c.pos))) {
      throw refuse(c, `${describeChar(c.text[c.pos])} in a comment`);
    }
    c.pos += 1;
  }
}

export function endOfLine(c: Cursor, after: string, key: string | null): void {
  skipSpaces(c);
  if (c.text[c.pos] === "#") comment(c);
  if (c.pos >= c.text.length) return;
  if (c.text[c.pos] === "\n" || c.text[c.pos] === "\r") {
    newline(c);
    return;
  }
  throw refuse(c, `unexpected ${describeChar(c.text[c.pos])} after ${after}`, key);
}
