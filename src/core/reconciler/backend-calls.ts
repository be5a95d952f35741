/**
 * The reconciler's side of the backend port, one instance per tick: counts every call (the
 * figure `/v1/diagnostics` and the benchmark report) and turns a throwing backend into the
 * "no answer" of the operation. A backend that throws is broken infrastructure; the tick
 * treats it exactly like an unavailable one, which changes nothing, instead of dying and
 * taking every other workload's step with it.
 */
import type { Log } from "../../lib/log.ts";
import type { SubmissionToken } from "../models.ts";
import {
  type AllocationBackend,
  type CancelResult,
  type FindResult,
  launchesSandboxed,
  type ObservationCursor,
  type ObservationTarget,
  type ObserveChangesResult,
  type ObserveResult,
  type SubmitRequest,
  type SubmitResult,
  type TerminalFact,
} from "../ports/allocation-backend.ts";
import type { PhaseConfirmations } from "./confirmations.ts";
import { type BackendOperation, zeroBackendCounts } from "./types.ts";
import type { BackendWatch } from "./watch.ts";

export interface TickBackend {
  readonly calls: Readonly<Record<BackendOperation, number>>;
  /** Some call answered Unavailable or threw. */
  readonly unavailable: boolean;
  observe(targets: readonly ObservationTarget[]): Promise<ObserveResult>;
  /** Whether the backend's record holds a change feed (`capabilities.changes`). */
  readonly reportsChanges: boolean;
  /** Counted as an observe. Only call when `reportsChanges`. */
  observeChanges(
    cursor: ObservationCursor | null,
    targets: readonly ObservationTarget[],
  ): Promise<ObserveChangesResult>;
  findByToken(
    tokens: readonly SubmissionToken[],
  ): Promise<ReadonlyMap<SubmissionToken, FindResult>>;
  /** Every request has an entry; a missing one is read as Unknown, never as absence. */
  submit(requests: readonly SubmitRequest[]): Promise<ReadonlyMap<SubmissionToken, SubmitResult>>;
  cancel(targets: readonly ObservationTarget[]): Promise<ReadonlyMap<string, CancelResult>>;
  /** Null: the backend has no acknowledger capability, or the call failed. */
  pendingTerminalFacts(): Promise<readonly TerminalFact[] | null>;
  acknowledgeTerminal(token: SubmissionToken): Promise<boolean>;
  /** Whether launches now run in the verified sandbox (false when the backend cannot say). */
  launchesSandboxed(): boolean;
}

export function tickBackend(
  backend: AllocationBackend,
  log: Log,
  watch: BackendWatch,
  confirm?: { readonly confirmations: PhaseConfirmations; readonly nowMs: () => number },
): TickBackend {
  const { changes, terminalFacts } = backend.capabilities;
  const calls = zeroBackendCounts();
  let unavailable = false;
  const broken = (operation: BackendOperation, error: unknown): string => {
    unavailable = true;
    const message = `backend ${backend.name} ${operation} threw: ${String(error)}`;
    log.error("backend call threw; treated as unavailable", {
      backend: backend.name,
      operation,
      error: String(error),
    });
    return message;
  };

  /** One observation (a listing, or the change feed since a cursor): counted and watched. */
  const observing = async <R extends ObserveResult | ObserveChangesResult>(
    run: () => Promise<R>,
  ): Promise<R | { readonly kind: "Unavailable"; readonly message: string }> => {
    calls.observe += 1;
    const done = watch.begin("observe");
    try {
      const result = await run();
      if (result.kind === "Unavailable") unavailable = true;
      done(result.kind !== "Unavailable");
      return result;
    } catch (error) {
      done(false);
      return { kind: "Unavailable", message: broken("observe", error) };
    }
  };

  return {
    calls,
    get unavailable() {
      return unavailable;
    },
    launchesSandboxed: () => launchesSandboxed(backend),
    async observe(targets) {
      if (targets.length === 0) return { kind: "Observed", observations: new Map() };
      const result = await observing(() => backend.observe(targets));
      if (result.kind === "Observed")
        confirm?.confirmations.observed(result.observations, confirm.nowMs());
      return result;
    },
    reportsChanges: changes !== null,
    async observeChanges(cursor, targets) {
      if (changes === null) throw new Error("observeChanges on a backend without it");
      const result = await observing(() => changes.observeChanges(cursor, targets));
      if (result.kind === "Observed" && confirm !== undefined) {
        const atMs = confirm.nowMs();
        confirm.confirmations.feedAnswered(cursor !== null, targets, atMs);
        confirm.confirmations.observed(result.observations, atMs);
        const changed = new Map(result.changes.map((c) => [c.target.allocationId, c.observation]));
        confirm.confirmations.observed(changed, atMs);
      }
      return result;
    },
    async findByToken(tokens) {
      if (tokens.length === 0) return new Map();
      calls.findByToken += 1;
      const done = watch.begin("findByToken");
      let answers: ReadonlyMap<SubmissionToken, FindResult>;
      try {
        answers = await backend.findByToken(tokens);
      } catch (error) {
        done(false);
        const message = broken("findByToken", error);
        return new Map(tokens.map((t) => [t, { kind: "Unavailable", message }] as const));
      }
      const out = new Map<SubmissionToken, FindResult>();
      for (const token of tokens) {
        const answer = answers.get(token);
        // A token the backend did not answer for is "no answer", never "not there".
        const found: FindResult = answer ?? { kind: "Unavailable", message: "no answer for token" };
        if (found.kind === "Unavailable") unavailable = true;
        out.set(token, found);
      }
      done([...out.values()].every((f) => f.kind !== "Unavailable"));
      return out;
    },
    async submit(requests) {
      if (requests.length === 0) return new Map();
      calls.submit += 1;
      const done = watch.begin("submit");
      let answers: ReadonlyMap<SubmissionToken, SubmitResult>;
      try {
        answers = await backend.submit(requests);
        // An Unknown is a submission nobody could answer for: as much a failure as a throw.
        done([...answers.values()].every((a) => a.kind !== "Unknown"));
      } catch (error) {
        done(false);
        // The call may have landed before it threw: Unknown, resolved by token next tick.
        const message = broken("submit", error);
        return new Map(
          requests.map((r) => [r.token, { kind: "Unknown", token: r.token, message }] as const),
        );
      }
      const out = new Map<SubmissionToken, SubmitResult>();
      for (const r of requests) {
        out.set(
          r.token,
          answers.get(r.token) ?? {
            kind: "Unknown",
            token: r.token,
            message: "no answer for token",
          },
        );
      }
      return out;
    },
    async cancel(targets) {
      if (targets.length === 0) return new Map();
      calls.cancel += 1;
      const done = watch.begin("cancel");
      try {
        const answers = await backend.cancel(targets);
        let answered = true;
        for (const answer of answers.values()) {
          if (answer.kind === "Unavailable") answered = false;
        }
        if (!answered) unavailable = true;
        done(answered);
        return answers;
      } catch (error) {
        done(false);
        const message = broken("cancel", error);
        return new Map(
          targets.map((t) => [t.allocationId, { kind: "Unavailable", message }] as const),
        );
      }
    },
    async pendingTerminalFacts() {
      if (terminalFacts === null) return null;
      calls.pendingTerminalFacts += 1;
      const done = watch.begin("pendingTerminalFacts");
      try {
        const facts = await terminalFacts.pendingTerminalFacts();
        done(true);
        return facts;
      } catch (error) {
        done(false);
        broken("pendingTerminalFacts", error);
        return null;
      }
    },
    async acknowledgeTerminal(token) {
      if (terminalFacts === null) return false;
      calls.acknowledgeTerminal += 1;
      const done = watch.begin("acknowledgeTerminal");
      try {
        await terminalFacts.acknowledgeTerminal(token);
        done(true);
        return true;
      } catch (error) {
        done(false);
        broken("acknowledgeTerminal", error);
        return false;
      }
    },
  };
}
