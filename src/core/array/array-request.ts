/**
 * What a BATCH workload's `array` asks for: N elements run from one submission, at most
 * `maxConcurrent` at a time. Validated here, once, for every backend, with errors that name
 * the field (a sweep of 1,000,000 on a site whose limit is 1,001 elements is refused at
 * admission, not after a scheduler round trip).
 */

export interface ArrayRequest {
  /** Elements 0..size-1. */
  readonly size: number;
  /** At most this many elements run at once; null: as many as the backend places. */
  readonly maxConcurrent: number | null;
}

export type ArrayRequestCheck =
  | { readonly kind: "Valid"; readonly request: ArrayRequest }
  | { readonly kind: "Invalid"; readonly field: string; readonly message: string };

/** `maxSize`: the most elements the backend places in one array (a site-wide limit). */
export function checkArrayRequest(
  size: unknown,
  maxConcurrent: unknown,
  maxSize: number,
): ArrayRequestCheck {
  if (typeof size !== "number" || !Number.isInteger(size) || size < 1 || size > maxSize) {
    return {
      kind: "Invalid",
      field: "array",
      message: `array must be an integer number of elements in 1..${maxSize}, got ${JSON.stringify(size)}`,
    };
  }
  if (maxConcurrent === undefined || maxConcurrent === null) {
    return { kind: "Valid", request: { size, maxConcurrent: null } };
  }
  if (
    typeof maxConcurrent !== "number" ||
    !Number.isInteger(maxConcurrent) ||
    maxConcurrent < 1 ||
    maxConcurrent > size
  ) {
    return {
      kind: "Invalid",
      field: "maxConcurrent",
      message: `maxConcurrent must be an integer in 1..${size} (the array's size), got ${JSON.stringify(maxConcurrent)}`,
    };
  }
  return { kind: "Valid", request: { size, maxConcurrent } };
}
