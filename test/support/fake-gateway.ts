/**
 * An in-memory stand-in for the worker gateway: connections are set by the test, and each
 * connected "worker" answers requests the way the real one does — `probe_workspace` reads
 * the file at the path it is given (from the worker's point of view, which a test can move
 * with `workspaceView`), `exec` runs through a scripted kernel.
 */
import { readFileSync } from "node:fs";
import type {
  RequestOptions,
  RequestOutcome,
  WorkerGateway,
} from "../../src/core/ports/worker-gateway.ts";
import type {
  CellEvent,
  ExecResponse,
  KernelStatus,
  ResponseFor,
  WorkerRequest,
  WorkerResponse,
} from "../../src/wire/worker-protocol.ts";

export interface SentRequest {
  readonly allocationId: string;
  readonly epoch: number;
  readonly rank: number;
  readonly request: WorkerRequest;
}

export interface FakeGateway
  extends Pick<WorkerGateway, "connected" | "connection" | "request" | "stop"> {
  readonly sent: SentRequest[];
  readonly stops: { allocationId: string; epoch: number }[];
  connect(allocationId: string, epoch: number, rank: number): void;
  disconnect(allocationId: string, epoch: number, rank: number): void;
  /** Maps the path a worker is asked to read to the path it really reads (default: same). */
  workspaceView: (path: string) => string;
  /** The kernel: code → response (default: evaluates "1+1" to "2", echoes others). */
  kernel: (code: string) => ExecResponse | "timeout";
  /** What the kernel prints and displays before answering (default: nothing). */
  kernelEvents: (code: string) => readonly CellEvent[];
  /** What rank 0's worker last said of its kernel (default: nothing). */
  kernelStatus: KernelStatus | null;
}

/** An exec answer: `value` is the last expression's text/plain. */
export function execAnswer(
  status: "OK" | "ERROR",
  value: string | null,
  error: string | null = null,
  kernelRestarted = false,
): ExecResponse {
  return {
    kind: "exec",
    status,
    result: value === null ? null : { "text/plain": value },
    error: error === null ? null : { ename: "Error", evalue: error, traceback: error },
    kernelRestarted,
  };
}

const key = (a: string, e: number) => `${e}:${a}`;

export function fakeGateway(): FakeGateway {
  const conns = new Map<string, Set<number>>();
  const gw: FakeGateway = {
    sent: [],
    stops: [],
    workspaceView: (p) => p,
    kernel: (code) => execAnswer("OK", code === "1+1" ? "2" : code),
    kernelEvents: () => [],
    kernelStatus: null,
    connection(a, e, r) {
      if (!conns.get(key(a, e))?.has(r)) return null;
      return { remoteAddress: "fake", connectedAt: 0, lastSeenAt: 0, kernel: gw.kernelStatus };
    },
    connect(a, e, r) {
      let set = conns.get(key(a, e));
      if (!set) {
        set = new Set();
        conns.set(key(a, e), set);
      }
      set.add(r);
    },
    disconnect(a, e, r) {
      conns.get(key(a, e))?.delete(r);
    },
    connected(a, e) {
      return new Set(conns.get(key(a, e)));
    },
    async request<R extends WorkerRequest>(
      allocationId: string,
      epoch: number,
      rank: number,
      request: R,
      _timeoutMs: number,
      options: RequestOptions = {},
    ): Promise<RequestOutcome<ResponseFor<R>>> {
      gw.sent.push({ allocationId, epoch, rank, request });
      if (!conns.get(key(allocationId, epoch))?.has(rank)) return { kind: "NotConnected" };
      let response: WorkerResponse;
      switch (request.kind) {
        case "probe_workspace": {
          let content: string | null;
          try {
            content = readFileSync(gw.workspaceView(request.path), "utf8");
          } catch {
            content = null;
          }
          response = { kind: "probe_workspace", found: content === request.expect, content };
          break;
        }
        case "exec": {
          const answer = gw.kernel(request.code);
          for (const event of gw.kernelEvents(request.code)) options.onEvent?.(event);
          if (answer === "timeout") return { kind: "TimedOut" };
          response = answer;
          break;
        }
        case "interrupt":
          response = { kind: "interrupt", delivered: false };
          break;
        case "restart":
          response = { kind: "restart", restarted: true, message: "the interpreter is running" };
          break;
        default:
          response = { kind: "error", message: "unsupported request" };
          break;
      }
      return { kind: "Answered", response } as RequestOutcome<ResponseFor<R>>;
    },
    stop(allocationId, epoch) {
      gw.stops.push({ allocationId, epoch });
      const n = conns.get(key(allocationId, epoch))?.size ?? 0;
      conns.delete(key(allocationId, epoch));
      return n;
    },
  };
  return gw;
}
