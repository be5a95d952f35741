import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/**
 * `w-` and 20 base36 characters from a CSPRNG (about 103 bits): unguessable, so an id seen
 * in a log does not let anyone enumerate its neighbours, and short enough for a terminal.
 */
export function mintWorkloadId(random: (n: number) => Uint8Array = randomBytes): string {
  let out = "w-";
  for (const b of random(20)) out += ALPHABET[b % 36];
  return out;
}
