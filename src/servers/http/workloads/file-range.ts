/**
 * `Range: bytes=...` (RFC 9110 §14) for one file download. One range is served; a list of
 * several is answered with the whole file (the RFC allows ignoring Range), so no multipart
 * body has to be built. A range that starts past the end is 416, as the RFC says.
 */

export type RangeChoice =
  | { readonly kind: "Whole" }
  | { readonly kind: "Part"; readonly startByte: number; readonly endByte: number }
  | { readonly kind: "Unsatisfiable" };

export function chooseRange(header: string | undefined, sizeBytes: number): RangeChoice {
  if (header === undefined) return { kind: "Whole" };
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  // Not a single byte range (another unit, a list, garbage): the whole file.
  if (match === null) return { kind: "Whole" };
  const [, first = "", last = ""] = match;
  if (first === "" && last === "") return { kind: "Whole" };
  if (first === "") {
    // A suffix: the last N bytes.
    const suffix = Number(last);
    if (suffix === 0 || sizeBytes === 0) return { kind: "Unsatisfiable" };
    return { kind: "Part", startByte: Math.max(0, sizeBytes - suffix), endByte: sizeBytes - 1 };
  }
  const startByte = Number(first);
  const endByte = last === "" ? sizeBytes - 1 : Math.min(Number(last), sizeBytes - 1);
  if (startByte >= sizeBytes) return { kind: "Unsatisfiable" };
  if (endByte < startByte) return { kind: "Whole" };
  return { kind: "Part", startByte, endByte };
}
