import type { MintAttemptInput, MintAttemptResult } from "../../../core/ports/reconciler-store.ts";
import type { StoreDeps } from "../deps.ts";
import { mintAttempt } from "./mint-attempt.ts";

/**
 * Many `mintAttempt`s in one IMMEDIATE transaction; one result per input, in order. Every
 * token is durable when this returns, before anything is submitted (INV-8). See
 * apply-transitions.ts for why batching is safe and why IMMEDIATE.
 */
export function mintAttempts(
  deps: StoreDeps,
  inputs: readonly MintAttemptInput[],
): readonly MintAttemptResult[] {
  if (inputs.length === 0) return [];
  return deps.db.$client
    .transaction(() => inputs.map((input) => mintAttempt(deps, input)))
    .immediate();
}
