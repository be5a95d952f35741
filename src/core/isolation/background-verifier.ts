/**
 * Isolation verification off the hot paths. Issue 8: when a cached verdict expired, the next
 * SESSION admission (an HTTP request) or attempt preparation (inside the reconciler tick)
 * submitted a probe allocation and waited up to 120 s for it; on a busy queue sessions
 * flapped between admitted and ISOLATION_UNAVAILABLE and every tick stalled behind the probe.
 *
 * Here the probe runs in the background: once at start and then on a schedule, one at a time.
 * Admission and preparation only read `current()`, the last verdict, which never waits.
 * A probe that could not run (still queued when its deadline came) is inconclusive: it keeps
 * an earlier Verified verdict instead of flapping it to refused.
 */
import { backgroundTimers, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { IsolationVerdict } from "../ports/allocation-backend.ts";

export type ProbeOutcome =
  | IsolationVerdict
  /** The probe never got to run (e.g. still waiting in a queue): says nothing either way. */
  | { readonly kind: "Inconclusive"; readonly message: string };

export interface BackgroundVerifierOptions {
  /**
   * One probe. `signal` aborts when the verifier stops (the daemon shuts down): a probe that
   * kept polling its allocation after that wrote into a spool already removed.
   */
  readonly probe: (signal: AbortSignal) => Promise<ProbeOutcome>;
  readonly log: Log;
  /** When the next probe runs. Default: timers that do not keep the process alive. */
  readonly schedule?: Timers;
  /** After a Verified verdict, the next probe in this long. */
  readonly verifiedIntervalMs: number;
  /** After an Unverified or inconclusive probe, the next one in this long. */
  readonly retryIntervalMs: number;
  /** Called with every new conclusive verdict (e.g. to start sandboxing launches). */
  readonly onVerdict?: (verdict: IsolationVerdict) => void;
  /** A verdict already obtained (e.g. at start): `start()` then waits its interval first. */
  readonly seed?: IsolationVerdict;
  /**
   * A verdict an earlier run of the daemon saw and that still counts (remembered-verdict.ts):
   * answered from the start, while `start()` probes again at once.
   */
  readonly remembered?: IsolationVerdict;
}

export interface BackgroundVerifier {
  /** The last conclusive verdict; Unverified ("not verified yet") before the first. */
  current(): IsolationVerdict;
  /**
   * Whether a conclusive verdict exists (seeded, remembered or probed). Before it, work that
   * needs the sandbox waits for it rather than failing on "not verified yet".
   */
  concluded(): boolean;
  /** Starts the first probe now (not awaited) and the schedule after it. */
  start(): void;
  /** Cancels the schedule and aborts the probe in flight (which then schedules nothing). */
  stop(): void;
  /** Resolves when the probe in flight (if any) has been judged; for tests and start-up logs. */
  settled(): Promise<void>;
}

export function createBackgroundVerifier(options: BackgroundVerifierOptions): BackgroundVerifier {
  const schedule = options.schedule ?? backgroundTimers;
  let verdict: IsolationVerdict = options.seed ??
    options.remembered ?? {
      kind: "Unverified",
      message: "not verified yet: the first isolation probe is still running",
    };
  let concluded = options.seed !== undefined || options.remembered !== undefined;
  let inFlight: Promise<void> | null = null;
  let cancelNext: (() => void) | null = null;
  let stopped = false;
  const stopping = new AbortController();

  function judge(outcome: ProbeOutcome): number {
    switch (outcome.kind) {
      case "Verified":
        verdict = outcome;
        concluded = true;
        options.onVerdict?.(outcome);
        return options.verifiedIntervalMs;
      case "Unverified":
        verdict = outcome;
        concluded = true;
        options.onVerdict?.(outcome);
        return options.retryIntervalMs;
      case "Inconclusive":
        // An earlier Verified verdict stands; before any, the "not verified yet" one says why.
        if (verdict.kind === "Unverified") {
          verdict = { kind: "Unverified", message: `not verified yet: ${outcome.message}` };
        }
        options.log.info("isolation probe inconclusive; the last verdict stands", {
          detail: outcome.message,
          verdict: verdict.kind,
        });
        return options.retryIntervalMs;
      default: {
        const never: never = outcome;
        throw new Error(`unhandled probe outcome ${JSON.stringify(never)}`);
      }
    }
  }

  function runOnce(): void {
    if (stopped || inFlight !== null) return;
    inFlight = (async () => {
      let nextMs = options.retryIntervalMs;
      try {
        const outcome = await options.probe(stopping.signal);
        // An answer after stop() is the abort's, not the nodes': the last verdict stands.
        if (!stopped) nextMs = judge(outcome);
      } catch (error) {
        // Broken infrastructure: logged, then judged as an inconclusive probe (an earlier
        // Verified stands, none is ever made from a throw) and tried again later.
        options.log.error("isolation probe failed", { error: String(error) });
        if (!stopped)
          nextMs = judge({ kind: "Inconclusive", message: `the probe failed: ${String(error)}` });
      } finally {
        inFlight = null;
        if (!stopped) cancelNext = schedule.after(nextMs, runOnce);
      }
    })();
  }

  return {
    current: () => verdict,
    concluded: () => concluded,
    start() {
      if (options.seed === undefined) {
        runOnce();
        return;
      }
      const firstMs =
        options.seed.kind === "Verified" ? options.verifiedIntervalMs : options.retryIntervalMs;
      cancelNext = schedule.after(firstMs, runOnce);
    },
    stop() {
      stopped = true;
      cancelNext?.();
      cancelNext = null;
      stopping.abort();
    },
    settled: () => inFlight ?? Promise.resolve(),
  };
}
