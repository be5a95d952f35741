/**
 * Disk blocks taken for a file's future appends, without changing its size: fallocate(2)
 * with FALLOC_FL_KEEP_SIZE. Readers still see only what was written, and the appends land in
 * blocks the file already owns, so a filesystem filled meanwhile (by the daemon's database,
 * by anyone) cannot refuse them. Room freed on demand instead is taken by whichever writer
 * asks first (issue 33: an array's late elements found it gone). Node and Bun have no
 * fallocate: bun:ffi calls libc's, as non-dumpable.ts does for prctl.
 */
import { dlopen, FFIType } from "bun:ffi";

/** <linux/falloc.h> */
const FALLOC_FL_KEEP_SIZE = 1;

export type PreallocateResult =
  | { readonly kind: "Preallocated" }
  | { readonly kind: "Failed"; readonly message: string };

type Fallocate = (fd: number, mode: number, offset: bigint, length: bigint) => number;

function libcFallocate(): Fallocate {
  const libc = dlopen("libc.so.6", {
    fallocate: {
      args: [FFIType.i32, FFIType.i32, FFIType.i64, FFIType.i64],
      returns: FFIType.i32,
    },
  });
  return libc.symbols.fallocate;
}

/** Takes `lengthBytes` from `offsetBytes` of the open file `fd`, its size unchanged. */
export function preallocate(
  fd: number,
  offsetBytes: number,
  lengthBytes: number,
  fallocate: () => Fallocate = libcFallocate,
): PreallocateResult {
  if (lengthBytes <= 0) return { kind: "Preallocated" };
  try {
    const rc = fallocate()(fd, FALLOC_FL_KEEP_SIZE, BigInt(offsetBytes), BigInt(lengthBytes));
    // libc sets errno, which bun:ffi does not surface: the failure is named, not explained.
    return rc === 0
      ? { kind: "Preallocated" }
      : { kind: "Failed", message: `fallocate(${lengthBytes} bytes) failed` };
  } catch (error) {
    return { kind: "Failed", message: `cannot call fallocate: ${String(error)}` };
  }
}
