/**
 * List cursors are opaque to clients: base64url of `createdAt.id` of the last item served.
 * Opaque so the keyset can change without breaking anyone who stored a cursor's meaning.
 */

export interface CursorPosition {
  readonly createdAt: number;
  readonly id: string;
}

export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(`${position.createdAt}.${position.id}`, "utf8").toString("base64url");
}

/** Null for anything that is not a cursor this daemon could have issued. */
export function decodeCursor(raw: string): CursorPosition | null {
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(raw)) return null;
  const text = Buffer.from(raw, "base64url").toString("utf8");
  const match = /^([0-9]{1,16})\.([A-Za-z0-9_-]{1,100})$/.exec(text);
  if (!match?.[1] || !match[2]) return null;
  // Round-trip check: base64url decoding ignores trailing garbage bits, so two strings can
  // decode alike; only the canonical spelling is a cursor.
  const position = { createdAt: Number(match[1]), id: match[2] };
  return encodeCursor(position) === raw ? position : null;
}
