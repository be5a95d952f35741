/**
 * A breaker per profile. The failure it answers (issue 21): a profile the backend refuses
 * every time (its account removed, its placement switched off or deleted) failed each
 * submission one by one, forever, with a fresh submit call each time, and nothing told the
 * admin "this profile is broken".
 *
 * After `threshold` consecutive rejections the profile is open (degraded), with the
 * backend's own message: its workloads are not handed to the backend and wait PENDING. When
 * the back-off has passed, one submission goes out as a trial: accepted, the breaker closes;
 * refused, it opens again with twice the back-off (up to a ceiling). Memory only: a restart
 * tries again, which is one submission per profile, not a storm.
 *
 * While it learns (fewer than `threshold` refusals), a refused workload is a suspect, not a
 * failure (issue 32: with the profile's placement switched off, 2 of 10 jobs ended FAILED before the
 * breaker opened). It waits, not sent again, until the profile gives a verdict: the breaker
 * opens (the profile is refused for all: it waits with the others), the profile accepts
 * another submission (the refusal was the workload's own: it fails with it), or one back-off
 * passes with neither (it fails: nothing may hang on a verdict that never comes).
 */

export interface ProfileBreakerOptions {
  /** Consecutive rejections that open the breaker. */
  readonly threshold: number;
  /** The first back-off; each refused trial doubles it. */
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
}

export const DEFAULT_PROFILE_BREAKER: ProfileBreakerOptions = {
  threshold: 3,
  initialBackoffMs: 30_000,
  maxBackoffMs: 30 * 60_000,
};

export type ProfileBreakerState =
  | { readonly kind: "Closed"; readonly consecutiveRejections: number }
  | {
      readonly kind: "Open";
      readonly consecutiveRejections: number;
      /** The backend's own words for the last rejection. */
      readonly message: string;
      readonly openedAtMs: number;
      /**
       * When the next trial submission may go out. Moved on by one back-off when a trial goes
       * out, so a trial whose answer never comes (a hung call, a workload that moved on
       * before it was submitted) cannot leave the profile waiting for ever.
       */
      readonly retryAtMs: number;
    };

export interface ProfileBreakerView {
  readonly profile: string;
  readonly state: ProfileBreakerState;
}

export interface ProfileBreakers {
  /**
   * Whether a submission for this profile may go out now: always while closed; while open,
   * once when the back-off has passed (the trial; later calls say no until it is answered,
   * or until one more back-off has passed without an answer).
   */
  allow(profile: string, nowMs: number): boolean;
  /**
   * `workloadId`: the workload refused; while the breaker is closed it becomes a suspect
   * (`verdict`), once the breaker is open it waits with the others.
   */
  rejected(profile: string, message: string, nowMs: number, workloadId?: string): void;
  accepted(profile: string): void;
  /**
   * A workload the store shows refused while the breaker learned, which this breaker does
   * not know (a restart lost its memory): a suspect again, from now, while the profile's
   * breaker is closed; false when it is open (the workload then waits with the others).
   */
  suspect(profile: string, workloadId: string, message: string, nowMs: number): boolean;
  /** What to do now with a workload refused while the breaker learned. */
  verdict(workloadId: string, nowMs: number): RefusalVerdict;
  /** The workload's verdict was acted on (or it moved on): no longer a suspect. */
  forget(workloadId: string): void;
  state(profile: string): ProfileBreakerState;
  /** Every profile that has been refused at least once since it last succeeded. */
  views(): readonly ProfileBreakerView[];
}

export type RefusalVerdict =
  /** Not a suspect: submit as the breaker allows. */
  | { readonly kind: "None" }
  /** Refused while the breaker learns, no verdict yet: wait, do not submit again. */
  | { readonly kind: "Held" }
  /** The refusal was its own (the profile works, or no verdict came in a back-off): fail. */
  | { readonly kind: "Own"; readonly message: string };

interface Suspect {
  readonly profile: string;
  readonly message: string;
  readonly heldUntilMs: number;
  own: boolean;
}

interface Entry {
  rejections: number;
  open: {
    message: string;
    openedAtMs: number;
    backoffMs: number;
    retryAtMs: number;
    /** A trial went out (allow) and is not answered yet. */
    trialOut: boolean;
  } | null;
}

function stateOf(entry: Entry | undefined): ProfileBreakerState {
  if (entry === undefined) return { kind: "Closed", consecutiveRejections: 0 };
  if (entry.open === null) return { kind: "Closed", consecutiveRejections: entry.rejections };
  return {
    kind: "Open",
    consecutiveRejections: entry.rejections,
    message: entry.open.message,
    openedAtMs: entry.open.openedAtMs,
    retryAtMs: entry.open.retryAtMs,
  };
}

/**
 * One more refusal on `entry`: "Learning" while it stays closed, "Opened" when this one
 * opened it, "Open" when it was open already.
 */
function countRejection(
  entry: Entry,
  options: ProfileBreakerOptions,
  threshold: number,
  message: string,
  nowMs: number,
): "Learning" | "Opened" | "Open" {
  entry.rejections += 1;
  const open = entry.open;
  if (open !== null) {
    open.message = message;
    // Only a refused trial doubles the back-off: the rest of the batch whose refusal opened
    // the breaker (ten submissions in one call) is the same verdict, not ten.
    if (open.trialOut) {
      open.backoffMs = Math.min(options.maxBackoffMs, open.backoffMs * 2);
      open.retryAtMs = nowMs + open.backoffMs;
      open.trialOut = false;
    }
    return "Open";
  }
  if (entry.rejections < threshold) return "Learning";
  const backoffMs = Math.min(options.maxBackoffMs, options.initialBackoffMs);
  entry.open = {
    message,
    openedAtMs: nowMs,
    backoffMs,
    retryAtMs: nowMs + backoffMs,
    trialOut: false,
  };
  return "Opened";
}

export function createProfileBreakers(
  options: ProfileBreakerOptions = DEFAULT_PROFILE_BREAKER,
): ProfileBreakers {
  const threshold = Math.max(1, Math.floor(options.threshold));
  const entries = new Map<string, Entry>();
  const suspects = new Map<string, Suspect>();
  /** A suspect waits one first back-off for its verdict (the profile's or its own). */
  function hold(profile: string, workloadId: string, message: string, nowMs: number): void {
    const heldUntilMs = nowMs + Math.min(options.maxBackoffMs, options.initialBackoffMs);
    suspects.set(workloadId, { profile, message, heldUntilMs, own: false });
  }
  return {
    allow(profile, nowMs) {
      const open = entries.get(profile)?.open ?? null;
      if (open === null) return true;
      if (nowMs < open.retryAtMs) return false;
      open.retryAtMs = nowMs + open.backoffMs;
      open.trialOut = true;
      return true;
    },
    rejected(profile, message, nowMs, workloadId) {
      const entry = entries.get(profile) ?? { rejections: 0, open: null };
      entries.set(profile, entry);
      const counted = countRejection(entry, options, threshold, message, nowMs);
      if (counted === "Learning" && workloadId !== undefined) {
        hold(profile, workloadId, message, nowMs);
      }
      if (counted !== "Opened") return;
      // Refused for all: the suspects were the profile's victims, and wait with the others.
      for (const [id, x] of suspects) if (x.profile === profile) suspects.delete(id);
    },
    suspect(profile, workloadId, message, nowMs) {
      if (entries.get(profile)?.open) return false;
      hold(profile, workloadId, message, nowMs);
      return true;
    },
    accepted(profile) {
      entries.delete(profile);
      for (const x of suspects.values()) if (x.profile === profile) x.own = true;
    },
    verdict(workloadId, nowMs) {
      const x = suspects.get(workloadId);
      if (x === undefined) return { kind: "None" };
      if (x.own || nowMs >= x.heldUntilMs) return { kind: "Own", message: x.message };
      return { kind: "Held" };
    },
    forget(workloadId) {
      suspects.delete(workloadId);
    },
    state: (profile) => stateOf(entries.get(profile)),
    views: () =>
      [...entries.entries()].map(([profile, entry]) => ({ profile, state: stateOf(entry) })),
  };
}
