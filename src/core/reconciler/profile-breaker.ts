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
  rejected(profile: string, message: string, nowMs: number): void;
  accepted(profile: string): void;
  state(profile: string): ProfileBreakerState;
  /** Every profile that has been refused at least once since it last succeeded. */
  views(): readonly ProfileBreakerView[];
}

interface Entry {
  rejections: number;
  open: { message: string; openedAtMs: number; backoffMs: number; retryAtMs: number } | null;
}

export function createProfileBreakers(
  options: ProfileBreakerOptions = DEFAULT_PROFILE_BREAKER,
): ProfileBreakers {
  const threshold = Math.max(1, Math.floor(options.threshold));
  const entries = new Map<string, Entry>();
  const stateOf = (entry: Entry | undefined): ProfileBreakerState => {
    if (entry === undefined) return { kind: "Closed", consecutiveRejections: 0 };
    if (entry.open === null) return { kind: "Closed", consecutiveRejections: entry.rejections };
    return {
      kind: "Open",
      consecutiveRejections: entry.rejections,
      message: entry.open.message,
      openedAtMs: entry.open.openedAtMs,
      retryAtMs: entry.open.retryAtMs,
    };
  };
  return {
    allow(profile, nowMs) {
      const open = entries.get(profile)?.open ?? null;
      if (open === null) return true;
      if (nowMs < open.retryAtMs) return false;
      open.retryAtMs = nowMs + open.backoffMs;
      return true;
    },
    rejected(profile, message, nowMs) {
      const entry = entries.get(profile) ?? { rejections: 0, open: null };
      entries.set(profile, entry);
      entry.rejections += 1;
      if (entry.open !== null) {
        const backoffMs = Math.min(options.maxBackoffMs, entry.open.backoffMs * 2);
        entry.open = { ...entry.open, message, backoffMs, retryAtMs: nowMs + backoffMs };
        return;
      }
      if (entry.rejections < threshold) return;
      const backoffMs = Math.min(options.maxBackoffMs, options.initialBackoffMs);
      entry.open = { message, openedAtMs: nowMs, backoffMs, retryAtMs: nowMs + backoffMs };
    },
    accepted(profile) {
      entries.delete(profile);
    },
    state: (profile) => stateOf(entries.get(profile)),
    views: () =>
      [...entries.entries()].map(([profile, entry]) => ({ profile, state: stateOf(entry) })),
  };
}
