/** The SQLite adapter of the worker gateway's nonce port (core/ports/nonce-burner.ts). */
import type { NonceBurner } from "../../../core/ports/nonce-burner.ts";
import type { StoreDeps } from "../deps.ts";
import { burnNonce, pruneBurnedNonces } from "../ops/burn-nonce.ts";

export function bindNonceBurner(deps: StoreDeps): NonceBurner {
  return {
    burn: (input) => burnNonce(deps, input),
    prune: () => pruneBurnedNonces(deps),
  };
}
