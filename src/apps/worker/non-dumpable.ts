/**
 * The worker holds its credential in memory for as long as it runs (it resumes with it after
 * a lost connection), and the kernel it starts runs the session's code as the same uid in the
 * same sandbox. Issue 18: that code read the credential from `/proc/<worker>/mem` and its
 * environment from `/proc/<worker>/environ`, which the kernel allows any process of the same
 * uid. prctl(PR_SET_DUMPABLE, 0) makes the kernel treat the worker like a setuid program:
 * its /proc files become root's and ptrace-style access is refused to an unprivileged
 * caller. A child it execs (the kernel) is dumpable again, as it must be, but cannot reach
 * its parent's memory. Node and Bun have no prctl: bun:ffi calls libc's (checked to work in
 * the compiled binary too).
 */
import { dlopen, FFIType } from "bun:ffi";

/** <linux/prctl.h> */
const PR_SET_DUMPABLE = 4;
const PR_GET_DUMPABLE = 3;

export type DumpableResult =
  | { readonly kind: "NonDumpable" }
  | { readonly kind: "Failed"; readonly message: string };

type Prctl = (option: number, arg2: bigint, arg3: bigint, arg4: bigint, arg5: bigint) => number;

function libcPrctl(): Prctl {
  const libc = dlopen("libc.so.6", {
    prctl: {
      args: [FFIType.i32, FFIType.u64, FFIType.u64, FFIType.u64, FFIType.u64],
      returns: FFIType.i32,
    },
  });
  return libc.symbols.prctl;
}

/**
 * Marks this process non-dumpable and reads the flag back: a call that returned success but
 * left the flag set would otherwise pass unnoticed. Must run before the credential is read.
 */
export function makeNonDumpable(prctl: () => Prctl = libcPrctl): DumpableResult {
  try {
    const call = prctl();
    if (call(PR_SET_DUMPABLE, 0n, 0n, 0n, 0n) !== 0) {
      return { kind: "Failed", message: "prctl(PR_SET_DUMPABLE, 0) failed" };
    }
    const now = call(PR_GET_DUMPABLE, 0n, 0n, 0n, 0n);
    if (now !== 0) {
      return { kind: "Failed", message: `still dumpable (PR_GET_DUMPABLE = ${now})` };
    }
    return { kind: "NonDumpable" };
  } catch (error) {
    return { kind: "Failed", message: `cannot call prctl: ${String(error)}` };
  }
}
