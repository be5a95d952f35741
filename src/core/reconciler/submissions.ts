/**
 * Starting attempts: mint (persist token and attempt) → prepare → one submit → record the
 * answers. The mint is committed before the backend is asked anything: a crash after the
 * backend accepted must leave a token in the store to find the job by (INV-8).
 *
 * Everything after the mint runs in a submit lane (lanes.ts), so neither a slow preparation
 * nor a submission whose answer never comes holds the tick.
 *
 * `submitAttempts` is the one way an attempt reaches the backend, with the same gates
 * wherever it is asked from: a tick (after its reads), a submission pass (no read), or the
 * admission of a workload whose first attempt was minted with it (reconciler.ts, `admitted`).
 */
import type { PrepareResult } from "../attempt-preparer.ts";
import { type Allocation, attemptMessage, type Workload } from "../models.ts";
import type { SubmitRequest } from "../ports/allocation-backend.ts";
import type { Transition, WorkloadChange } from "../ports/reconciler-store.ts";
import { type TickEnv, write } from "./env.ts";
import type { LaneOutcome } from "./lanes.ts";
import { refusedAttempt, refusedWhileLearning } from "./refused-while-learning.ts";
import { recordSubmitResult, refuseAttempt } from "./submit-decisions.ts";

export interface Live {
  readonly workload: Workload;
  readonly allocation: Allocation;
}

/**
 * Mints attempts for `mint` (workloads that want to run and hold nothing) and starts one
 * submit lane for them, the `fresh` attempts (minted by this process, never handed to the
 * backend) and `resubmit` (attempts this tick resolved Absent by token). Returns how many of
 * them were left waiting (no lane, backend not answering, degraded profile, a lost mint).
 */
export function submitAttempts(
  env: TickEnv,
  mint: readonly Workload[],
  fresh: readonly Live[],
  resubmit: readonly Live[] = [],
): number {
  const waiting = mint.length + fresh.length + resubmit.length;
  if (waiting > 0 && !env.lanes.hasRoom("submit")) {
    // Every submit lane is taken (hung submissions): nothing is minted, so these wait as
    // they are, PENDING or SUBMITTING without a handle, for a tick with a free lane.
    env.log.debug("every submit lane is in flight; new attempts wait", { waiting });
    return waiting;
  }
  // The workloads stay as they are (PENDING, or SUBMITTING with a fresh token) until the
  // backend is heard from. A resubmit follows a lookup this tick answered, so it goes ahead.
  const held = mint.length + fresh.length > 0 && env.newAttemptsHeld();
  if (held) {
    env.log.info("backend not answering; new attempts wait", {
      waiting: mint.length + fresh.length,
    });
  }
  const now = env.clock.now();
  // A degraded profile's workloads wait (PENDING, or SUBMITTING with a fresh token) until its
  // back-off has passed; then one of them goes out as the trial (profile-breaker.ts).
  const allowed = (w: Workload) => env.breakers.allow(w.profile, now);
  if (held) {
    const answered = resubmit.filter((l) => allowed(l.workload));
    return waiting - start(env, answered);
  }
  const mintNow: Workload[] = [];
  const waitingForProfile: Workload[] = [];
  for (const w of mint) (allowed(w) ? mintNow : waitingForProfile).push(w);
  holdDegraded(env, waitingForProfile);
  const attempts = [
    ...mintAll(env, mintNow),
    ...fresh.filter((l) => allowed(l.workload)),
    ...resubmit.filter((l) => allowed(l.workload)),
  ];
  return waiting - start(env, attempts);
}

/**
 * One lane for `attempts` (none for none); how many went. An attempt already in a lane is
 * left to it: a tick's plan is made before it awaits the backend, and meanwhile the turn of
 * an admitted attempt (admitted.ts) handed the same attempt over, or the other way round.
 * Both then submitted its token, lookup-free while fresh: one token, two jobs (issue 33).
 */
function start(env: TickEnv, attempts: readonly Live[]): number {
  const free = attempts.filter((a) => !env.lanes.busy(a.allocation.id));
  if (free.length > 0) env.started.push(startSubmissions(env, free));
  return attempts.length;
}

/** A rejected attempt of a degraded profile: the attempt FAILED, the workload back to wait. */
function refusedWhileDegraded(live: Live, message: string, now: number): Transition {
  const { workload: w, allocation: a } = live;
  return {
    allocation: refusedAttempt(a, message, now),
    workload: degradedWait(w, message).workload,
  };
}

/** Why they wait, on the workloads a degraded profile holds: written once, not every tick. */
function holdDegraded(env: TickEnv, waiting: readonly Workload[]): void {
  const transitions: Transition[] = [];
  for (const w of waiting) {
    if (w.phase !== "PENDING" || w.reason === "PROFILE_DEGRADED") continue;
    const state = env.breakers.state(w.profile);
    if (state.kind !== "Open") continue;
    transitions.push(degradedWait(w, state.message));
  }
  write(env, transitions);
}

/** The workload waits PENDING with PROFILE_DEGRADED and the backend's own message. */
function degradedWait(w: Workload, message: string): { readonly workload: WorkloadChange } {
  return {
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: "PENDING",
      reason: "PROFILE_DEGRADED",
      message: `profile ${w.profile} is degraded, the backend refuses its submissions: ${message}; it is retried with back-off`,
    },
  };
}

/** Persists one attempt per workload (one transaction); the ones minted, ready to submit. */
function mintAll(env: TickEnv, mint: readonly Workload[]): Live[] {
  if (mint.length === 0) return [];
  const attempts: Live[] = [];
  const inputs = mint.map((w) => ({
    workloadId: w.id,
    allocationId: env.newAllocationId(),
    token: env.mintToken(),
    expectedEpoch: w.executionEpoch,
    message: attemptMessage(w.executionEpoch + 1, w.maxAttempts),
  }));
  const results = env.store.mintAttempts(inputs);
  results.forEach((r, i) => {
    const w = mint[i];
    const input = inputs[i];
    if (w === undefined || input === undefined) return;
    switch (r.kind) {
      case "Minted":
        env.counters.minted += 1;
        env.counters.writes += 1;
        attempts.push({
          workload: {
            ...w,
            executionEpoch: r.allocation.epoch,
            phase: "SUBMITTING",
            reason: null,
            message: input.message,
          },
          allocation: r.allocation,
        });
        // Minted by this process and not yet handed to any backend call: the only tokens
        // whose lookup before submit is provably useless.
        env.fresh.add(r.allocation.id);
        break;
      case "Stale":
        env.log.debug("attempt not minted; the workload moved on", {
          workloadId: w.id,
          message: r.message,
        });
        break;
      default: {
        const unreachable: never = r;
        throw new Error(`unhandled mint result ${JSON.stringify(unreachable)}`);
      }
    }
  });
  env.faultPoint("reconciler.after-mint");
  return attempts;
}

/**
 * Starts the submit lane for attempts whose tokens are durable: it prepares them, submits
 * the prepared ones in one backend call and records every answer. The attempts are busy
 * from this call on (synchronously), so no tick asks for their tokens meanwhile.
 */
function startSubmissions(env: TickEnv, attempts: readonly Live[]): Promise<LaneOutcome> {
  return env.lanes.start(
    "submit",
    attempts.map((a) => a.allocation.id),
    () => prepareAndSubmit(env, attempts),
  );
}

async function prepareAndSubmit(env: TickEnv, attempts: readonly Live[]): Promise<void> {
  const prepared = await Promise.all(
    attempts.map(async (live): Promise<PrepareResult | null> => {
      try {
        return await env.preparer.prepare(live.workload, live.allocation);
      } catch (error) {
        // A full disk will not be fixed by the next tick: the attempt ends, named for the
        // disk rather than the job (issue 18), and new work is refused until space returns.
        if ((error as { readonly code?: unknown }).code === "ENOSPC") {
          return {
            kind: "Refused",
            reason: "SPOOL_FULL",
            message: `no space left to prepare the attempt's files: ${String(error)}`,
          };
        }
        // Broken infrastructure (a directory that cannot be created): the attempt stays
        // SUBMITTING with no handle, so a later tick submits it again (by token, or at once
        // while its token is still fresh) and prepares again.
        env.log.error("preparing an attempt failed; retried next tick", {
          workloadId: live.workload.id,
          allocationId: live.allocation.id,
          error: String(error),
        });
        return null;
      }
    }),
  );
  const now = env.clock.now();
  const refusals: Transition[] = [];
  const requests: { readonly live: Live; readonly request: SubmitRequest }[] = [];
  attempts.forEach((live, i) => {
    const p = prepared[i];
    if (p === null || p === undefined) return;
    switch (p.kind) {
      case "Refused":
        env.fresh.delete(live.allocation.id);
        refusals.push(refuseAttempt(live.workload, live.allocation, p.reason, p.message, now));
        break;
      case "Prepared":
        requests.push({ live, request: submitRequest(env, live, p) });
        break;
      case "NotYet":
        // Nothing was submitted: the attempt keeps its fresh token and waits for a later
        // tick, as a preparation that threw does, without an error in the log each tick.
        env.log.debug("attempt waits to be prepared", {
          workloadId: live.workload.id,
          allocationId: live.allocation.id,
          detail: p.message,
        });
        break;
      default: {
        const unreachable: never = p;
        throw new Error(`unhandled prepare result ${JSON.stringify(unreachable)}`);
      }
    }
  });
  write(env, refusals);
  if (requests.length > 0) await submitAndRecord(env, requests);
}

function submitRequest(
  env: TickEnv,
  live: Live,
  p: Extract<PrepareResult, { readonly kind: "Prepared" }>,
): SubmitRequest {
  return {
    allocationId: live.allocation.id,
    workloadId: live.workload.id,
    workloadKind: live.workload.kind,
    token: live.allocation.token,
    epoch: live.allocation.epoch,
    profile: live.workload.profile,
    name: live.workload.name,
    launch: p.attempt.launch,
    timeLimitSeconds: p.attempt.timeLimitSeconds,
    ...(live.workload.spec.resources === undefined
      ? {}
      : { resources: live.workload.spec.resources }),
    allocationDir: p.attempt.allocationDir,
    workspaceDir: p.attempt.workspaceDir,
    owner: live.workload.owner ?? null,
    ...(env.fresh.has(live.allocation.id) ? { freshToken: true as const } : {}),
    ...arrayOf(live),
  };
}

/** The attempt's array: its size as minted (what observation reads too), its cap as asked. */
function arrayOf(live: Live): Pick<SubmitRequest, "array"> {
  const size = live.allocation.arraySize;
  if (size === undefined || size === null) return {};
  return { array: { size, maxConcurrent: live.workload.spec.maxConcurrent ?? null } };
}

/**
 * One backend call for the lane's attempts, then their answers recorded. Its writes are
 * compare-and-set like every other step, so an answer that arrives after the world moved (a
 * stop fenced the attempt) is simply not applied, and the next tick resolves that attempt by
 * token.
 */
async function submitAndRecord(
  env: TickEnv,
  requests: readonly { readonly live: Live; readonly request: SubmitRequest }[],
): Promise<void> {
  // Asked before submitting: a backend that starts sandboxing meanwhile only makes this
  // conservative (a sandboxed launch recorded as not sandboxed), never the other way.
  const sandboxed = env.backend.launchesSandboxed();
  // Handed over from here on, whatever comes back: any later submit asks by token first.
  for (const { request } of requests) env.fresh.delete(request.allocationId);
  const answers = await env.backend.submit(requests.map((r) => r.request));
  env.faultPoint("reconciler.after-submit");
  const recorded: Transition[] = [];
  for (const { live, request } of requests) {
    const answer = answers.get(request.token) ?? {
      kind: "Unknown" as const,
      token: request.token,
      message: "no answer for token",
    };
    if (answer.kind === "Created" || answer.kind === "Existing") {
      env.counters.submitted += 1;
      env.breakers.accepted(request.profile);
    }
    // A refusal of this request alone (its own arguments, its owner's account) says nothing
    // about the profile.
    if (answer.kind === "Rejected" && answer.byRequest !== true && answer.reason === undefined) {
      env.breakers.rejected(request.profile, answer.message, env.clock.now(), live.workload.id);
      const state = env.breakers.state(request.profile);
      if (state.kind === "Open") {
        // Refused with the profile degraded: not this workload's failure. The attempt ends
        // refused, and the workload waits for the profile like the others.
        env.log.warn("profile degraded: the backend refuses its submissions", {
          profile: request.profile,
          consecutiveRejections: state.consecutiveRejections,
          message: answer.message,
        });
        recorded.push(refusedWhileDegraded(live, answer.message, env.clock.now()));
        continue;
      }
      // While the breaker learns: not failed yet, it waits for the profile's verdict.
      recorded.push(
        refusedWhileLearning(live, answer.message, env.clock.now(), answer.messageAdmin ?? null),
      );
      continue;
    }
    if (answer.kind === "Unknown") {
      env.log.warn("submission outcome unknown; resolved by token next tick", {
        allocationId: live.allocation.id,
        message: answer.message,
      });
    }
    recorded.push(
      recordSubmitResult(live.workload, live.allocation, answer, env.clock.now(), sandboxed),
    );
  }
  write(env, recorded);
}
