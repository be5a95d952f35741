/**
 * What the API and the reconciler need from the sessions engine at run time: running code in
 * a READY session (`exec`), the gateway's expectations (which allocations may have workers
 * dial in), and the session half of the cancel barrier.
 *
 * Over 400 lines because the exec path (timeouts, escalation, restart, the cell log) shares one closure over the gateway; to be split with the cells work.
 */
import { randomUUID } from "node:crypto";
import type { Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { CellEvent, ExecResponse } from "../../wire/worker-protocol.ts";
import type { Allocation, Workload } from "../models.ts";
import { SESSION_MAX_RANKS, type SessionAttempts } from "../ports/session-attempts.ts";
import type { SessionStore } from "../ports/session-store.ts";
import type {
  GatewayExpectation,
  GatewayExpectations,
  WorkerGateway,
} from "../ports/worker-gateway.ts";
import type { BarrierHooks } from "../reconciler/types.ts";
import { codeMayRun, runningCurrentAllocation } from "./code-may-run.ts";
import { restartKernel } from "./restart-kernel.ts";
import type {
  ExecOptions,
  ExecOutcome,
  ExecOutput,
  InterruptOutcome,
  RestartOutcome,
  SessionService,
} from "./session-port.ts";

export interface SessionServiceOptions {
  readonly store: SessionStore;
  readonly gateway: Pick<WorkerGateway, "request">;
  readonly log: Log;
  /**
   * How long the daemon waits for a worker's answer to an exec at most. Not a cell limit
   * (cells have none unless the request asks, `timeoutSeconds`): the longest a timer can
   * wait, so a worker that never answers cannot hold a request forever.
   */
  readonly execTimeoutMs?: number;
  /**
   * After an interrupt, how long the cell has to stop before its kernel is restarted
   * (default 10 s): code stuck in C, or catching KeyboardInterrupt, must not hold the
   * session's every later cell.
   */
  readonly interruptGraceMs?: number;
  /** Where the disconnect grace waits (tests: a manual timeline), from the composition. */
  readonly timers: Timers;
  /** Called when an exec finds the worker gone, so readiness is re-evaluated at once. */
  readonly onWorkerLost?: () => void;
}

/** An interrupt is one signal in the worker: an answer this slow means the worker is gone. */
const INTERRUPT_TIMEOUT_MS = 5000;
export const DEFAULT_INTERRUPT_GRACE_MS = 10_000;
/** The longest delay a timer takes (2^31 - 1 ms, about 24.8 days); longer ones fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

type Located =
  | { readonly kind: "Located"; readonly allocation: Allocation }
  | Exclude<ExecOutcome, { readonly kind: "Ok" }>;

/**
 * Exec runs in the kernel of rank 0 of the workload's CURRENT attempt, and only when READY is
 * TRUE: a session whose workspace was never confirmed must not run a user's code where the
 * user's data is not. One exception: READY FALSE only because the kernel died. The next exec
 * is what restarts it (and says so), so refusing it would leave the session dead for good.
 * Recording the activity is the API's job (ExecOutcome's contract).
 */
export function createSessionService(options: SessionServiceOptions): SessionService {
  const { store, gateway } = options;
  const execTimeoutMs = Math.min(options.execTimeoutMs ?? MAX_TIMER_MS, MAX_TIMER_MS);
  const interruptGraceMs = options.interruptGraceMs ?? DEFAULT_INTERRUPT_GRACE_MS;
  const { timers } = options;

  function locate(workloadId: string): Located {
    const workload = store.getWorkload(workloadId);
    if (workload?.kind !== "SESSION") return { kind: "NotFound" };
    const may = codeMayRun(store, workloadId);
    if (may.kind === "No") {
      return {
        kind: "NotReady",
        message: `the session is ${workload.phase} and not READY (${may.why})`,
      };
    }
    if (workload.desired.kind === "STOP") {
      return { kind: "NotReady", message: `the session is stopping (${workload.desired.reason})` };
    }
    const current = runningCurrentAllocation(store, workload);
    if (current === null) {
      return { kind: "NotReady", message: "the session's allocation is not running" };
    }
    return { kind: "Located", allocation: current };
  }

  async function interruptCell(a: Allocation, cell: string | undefined): Promise<boolean> {
    const outcome = await gateway.request(
      a.id,
      a.epoch,
      0,
      { kind: "interrupt", ...(cell !== undefined && { cell }), restartAfterMs: interruptGraceMs },
      INTERRUPT_TIMEOUT_MS,
    );
    return outcome.kind === "Answered" && outcome.response.delivered;
  }

  /**
   * Runs one cell that `exec` located. A caller that goes away changes nothing: the cell
   * runs on (issue 23; it used to be interrupted after a grace, which made a dropped
   * connection cost the computation), and the API keeps its events for a client to
   * re-attach.
   */
  async function runCell(
    workloadId: string,
    current: Allocation,
    cell: string,
    code: string,
    execOptions: ExecOptions,
  ): Promise<ExecOutcome> {
    const { onOutput } = execOptions;
    const collected: Collected = { outputs: [], chars: 0, dropped: 0 };
    const onEvent = (event: CellEvent) => {
      if (event.type === "jupyter") return; // only a Jupyter request's (jupyter/ relays them)
      if (event.type === "kernel") {
        execOptions.onKernel?.(event.message);
        return;
      }
      const output = toOutput(event);
      appendOutput(collected, output);
      onOutput?.(output);
    };
    // The cell's own limit, when the client set one: interrupted (and escalated) like a
    // click on the interrupt button; the answer keeps what the cell printed until then.
    const limit = { timedOut: false };
    const limitSeconds = execOptions.timeoutSeconds;
    const cancelLimit =
      limitSeconds === undefined
        ? null
        : timers.after(Math.min(limitSeconds * 1000, MAX_TIMER_MS), () => {
            limit.timedOut = true;
            void interruptCell(current, cell).then((interrupted) =>
              options.log.info("exec over its timeout", { workloadId, interrupted }),
            );
          });
    let outcome: Awaited<ReturnType<typeof gateway.request<{ kind: "exec"; code: string }>>>;
    try {
      outcome = await gateway.request(
        current.id,
        current.epoch,
        0,
        {
          kind: "exec",
          code,
          cell,
          ...(execOptions.maxOutputChars === undefined
            ? {}
            : { maxOutputChars: execOptions.maxOutputChars }),
        },
        execTimeoutMs,
        { onEvent },
      );
    } finally {
      cancelLimit?.();
    }
    switch (outcome.kind) {
      case "Answered": {
        const response =
          limit.timedOut && outcome.response.status === "ERROR"
            ? overTimeout(outcome.response, limitSeconds ?? 0)
            : outcome.response;
        return answeredOutcome(response, collected, onOutput);
      }
      case "NotConnected":
      case "Disconnected":
        options.onWorkerLost?.();
        return { kind: "NotReady", message: "the session's worker is not connected" };
      case "TimedOut": {
        // Only a worker silent for the longest timer (its cell limits answer long before):
        // the cell is interrupted so it does not hold every later exec behind it.
        const interrupted = await interruptCell(current, cell);
        options.log.warn("exec got no answer from the worker", { workloadId, interrupted });
        return {
          kind: "NotReady",
          message: `the worker did not answer within ${Math.round(execTimeoutMs / 1000)} s; ${
            interrupted
              ? "the cell was interrupted"
              : "the code may still be running (the interrupt was not delivered)"
          }`,
        };
      }
      case "WorkerError":
        return { kind: "NotReady", message: `the worker could not run it: ${outcome.message}` };
      case "TooLarge":
        return { kind: "NotReady", message: `the code is too large (${outcome.bytes} bytes)` };
      default: {
        const unreachable: never = outcome;
        throw new Error(`unhandled exec outcome ${JSON.stringify(unreachable)}`);
      }
    }
  }

  return {
    async exec(workloadId: string, code: string, execOptions: ExecOptions = {}) {
      const located = locate(workloadId);
      if (located.kind !== "Located") return located;
      execOptions.onStart?.();
      return runCell(workloadId, located.allocation, randomUUID(), code, execOptions);
    },

    async interrupt(workloadId: string): Promise<InterruptOutcome> {
      const located = locate(workloadId);
      if (located.kind !== "Located") return located;
      return { kind: "Ok", interrupted: await interruptCell(located.allocation, undefined) };
    },

    async restart(workloadId: string): Promise<RestartOutcome> {
      const located = locate(workloadId);
      if (located.kind !== "Located") return located;
      const restarted = await restartKernel(gateway, located.allocation);
      switch (restarted.kind) {
        case "Answered":
          return { kind: "Ok", running: restarted.running, message: restarted.message };
        case "WorkerGone":
          options.onWorkerLost?.();
          return { kind: "NotReady", message: "the session's worker is not connected" };
        case "NoAnswer":
          return { kind: "NotReady", message: restarted.message };
        default: {
          const unreachable: never = restarted;
          throw new Error(`unhandled restart ${JSON.stringify(unreachable)}`);
        }
      }
    },
  };
}

function toOutput(
  event: Exclude<CellEvent, { readonly type: "kernel" } | { readonly type: "jupyter" }>,
): ExecOutput {
  return event.type === "stream"
    ? { type: "stream", name: event.name, text: event.text }
    : { type: "display_data", data: event.data };
}

/** A cell stopped by its own time limit says so, first; how it was stopped follows. */
function overTimeout(r: ExecResponse, limitSeconds: number): ExecResponse {
  const how = r.error ? `${r.error.ename}: ${r.error.evalue}` : "stopped";
  const evalue = `the cell ran past its timeoutSeconds (${limitSeconds} s) and was interrupted (${how}); its output until then is kept`;
  return {
    ...r,
    error: {
      ename: "CellTimeout",
      evalue,
      traceback: `${r.error?.traceback ?? ""}${r.error?.traceback ? "\n" : ""}CellTimeout: ${evalue}`,
    },
  };
}

function finalOutput(r: ExecResponse): ExecOutput | null {
  if (r.error) return { type: "error", ...r.error };
  if (r.result) return { type: "execute_result", data: r.result };
  return null;
}

/**
 * What one plain exec answer may hold. The kernel caps each output, but not how many a cell
 * makes (a hundred displays of half a megabyte each), and the worker's side of the channel
 * is no more trusted than the code it runs: the daemon's memory is bounded here.
 */
const MAX_COLLECTED_CHARS = 16 * 1024 * 1024;

interface Collected {
  readonly outputs: ExecOutput[];
  chars: number;
  dropped: number;
}

function outputChars(output: ExecOutput): number {
  switch (output.type) {
    case "stream":
      return output.text.length;
    case "display_data":
    case "execute_result":
      return Object.entries(output.data).reduce((n, [k, v]) => n + k.length + v.length, 0);
    case "error":
      return output.ename.length + output.evalue.length + output.traceback.length;
    default: {
      const never: never = output;
      throw new Error(`unhandled output ${JSON.stringify(never)}`);
    }
  }
}

/** Adjacent text of one stream is one output, as a notebook shows it. Bounded, with a note. */
function appendOutput(collected: Collected, output: ExecOutput): void {
  const chars = outputChars(output);
  if (collected.chars + chars > MAX_COLLECTED_CHARS) {
    collected.dropped += 1;
    return;
  }
  collected.chars += chars;
  const outputs = collected.outputs;
  const last = outputs.at(-1);
  if (last?.type === "stream" && output.type === "stream" && last.name === output.name) {
    outputs[outputs.length - 1] = { ...last, text: last.text + output.text };
  } else {
    outputs.push(output);
  }
}

/** stdout and stderr as they came, then the last expression's text: what a terminal shows. */
/** A cell's answer, with what it printed on the way and its final value. */
function answeredOutcome(
  response: ExecResponse,
  collected: Collected,
  onOutput: ExecOptions["onOutput"],
): ExecOutcome {
  const final = finalOutput(response);
  const outputs = collected.outputs;
  if (collected.dropped > 0) {
    outputs.push({
      type: "stream",
      name: "stderr",
      text: `\n[... ${collected.dropped} outputs not shown: an exec answer holds at most ${MAX_COLLECTED_CHARS} characters]\n`,
    });
  }
  if (final) {
    outputs.push(final);
    onOutput?.(final);
  }
  return {
    kind: "Ok",
    status: response.status,
    output: joinOutput(outputs),
    error: response.error?.traceback ?? null,
    outputs,
    kernelRestarted: response.kernelRestarted,
  };
}

function joinOutput(outputs: readonly ExecOutput[]): string {
  let out = "";
  for (const o of outputs) {
    if (o.type === "stream") out += o.text;
    else if (o.type === "execute_result" || o.type === "display_data") {
      const text = o.data["text/plain"] ?? "";
      out += out === "" || out.endsWith("\n") ? text : `\n${text}`;
    }
  }
  return out;
}

/**
 * Which allocations may have workers connect, read from the store on every judged
 * credential (the gateway calls this synchronously). An allocation is expected when it is
 * a SESSION's CURRENT attempt, in an active phase other than STOPPING, and its workload still
 * wants to run; anything else is fenced, so a worker of a stopped or superseded attempt is
 * refused even if its credential has not expired (INV-7).
 */
export function createGatewayExpectations(deps: {
  readonly store: SessionStore;
  readonly attempts: Pick<SessionAttempts, "read">;
  /** The most ranks an attempt of this workload can have (its profile's nodes). */
  readonly maxRanksOf?: (workload: Workload) => number;
}): GatewayExpectations {
  const ranksCache = new Map<string, number>();
  return {
    lookup(allocationId: string): GatewayExpectation | null {
      const allocation = deps.store.getAllocation(allocationId);
      if (!allocation) return null;
      const workload = deps.store.getWorkload(allocation.workloadId);
      if (workload?.kind !== "SESSION") return null;
      let ranks = ranksCache.get(allocationId);
      if (ranks === undefined) {
        const read = deps.attempts.read(
          workload.id,
          allocationId,
          deps.maxRanksOf?.(workload) ?? SESSION_MAX_RANKS,
        );
        // Missing or invalid (readiness logs it): no worker of this attempt is admitted.
        if (read.kind !== "Valid") return null;
        ranks = read.record.ranks;
        ranksCache.set(allocationId, ranks);
      }
      const fenced =
        workload.executionEpoch !== allocation.epoch ||
        workload.desired.kind === "STOP" ||
        !(
          allocation.phase === "SUBMITTING" ||
          allocation.phase === "QUEUED" ||
          allocation.phase === "RUNNING"
        );
      return { epoch: allocation.epoch, ranks, fenced };
    },
  };
}

export interface SessionBarrierOptions {
  readonly gateway: Pick<WorkerGateway, "stop" | "connected">;
  readonly clock: { now(): number };
  readonly log: Log;
  /** After this long since the first `cancelTasks`, `drained` answers true regardless. */
  readonly drainDeadlineMs?: number;
}

/**
 * The session half of the reconciler's cancel barrier (stages 2 and 3): tell the attempt's
 * workers to exit and refuse its credentials from now on; drained once none of them is
 * connected. Re-entrant like the barrier itself: the gateway's stop is idempotent, and the
 * drain deadline starts at the first call, so a barrier re-run after a lagging backend does
 * not wait anew. The deadline exists because a worker that ignores `stop` must not wedge the
 * barrier: stage 4 (the backend's release) kills it anyway. BATCH has no workers: no-op.
 */
export function createSessionBarrierHooks(options: SessionBarrierOptions): BarrierHooks {
  const drainDeadlineMs = options.drainDeadlineMs ?? 10_000;
  const stoppedAt = new Map<string, number>();
  return {
    async cancelTasks(workload: Workload, allocation: Allocation) {
      if (workload.kind !== "SESSION") return;
      if (!stoppedAt.has(allocation.id)) stoppedAt.set(allocation.id, options.clock.now());
      const told = options.gateway.stop(allocation.id, allocation.epoch, "the session is stopping");
      if (told > 0) {
        options.log.info("told session workers to stop", {
          workloadId: workload.id,
          allocationId: allocation.id,
          workers: told,
        });
      }
    },
    async drained(workload: Workload, allocation: Allocation) {
      if (workload.kind !== "SESSION") return true;
      if (options.gateway.connected(allocation.id, allocation.epoch).size === 0) {
        stoppedAt.delete(allocation.id);
        return true;
      }
      const since = stoppedAt.get(allocation.id);
      return since !== undefined && options.clock.now() - since >= drainDeadlineMs;
    },
  };
}
