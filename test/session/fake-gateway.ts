/**
 * An in-memory stand-in for the worker gateway: connections are set by the test, and each
 * connected "worker" answers requests the way the real one does — `probe_workspace` reads
 * the file at the path it is given (from the worker's point of view, which a test can move
 * with `workspaceView`), `exec` runs through a scripted kernel.
 */
import { readFileSync } from "node:fs";
import type { RequestOutcome, WorkerGateway } from "../../src/orchestration/worker-gateway.ts";
import type {
  ExecResponse,
  ResponseFor,
  WorkerRequest,
  WorkerResponse,
} from "../../src/orchestration/worker-protocol.ts";

export interface SentRequest {
  readonly allocationId: string;
  readonly epoch: number;
  readonly rank: number;
  readonly request: WorkerRequest;
}

export interface FakeGateway extends Pick<WorkerGateway, "connected" | "request" | "stop"> {
  readonly sent: SentRequest[];
  readonly stops: { allocationId: string; epoch: number }[];
  connect(allocationId: string, epoch: number, rank: number): void;
  disconnect(allocationId: string, epoch: number, rank: number): void;
  /** Maps the path a worker is asked to read to the path it really reads (default: same). */
  workspaceView: (path: string) => string;
  /** The kernel: code → response (default: evaluates "1+1" to "2", echoes others). */
  kernel: (code: string) => ExecResponse | "timeout";
}

const key = (a: string, e: number) => `${e}:${a}`;

export function fakeGateway(): FakeGateway {
  const conns = new Map<string, Set<number>>();
  const gw: FakeGateway = {
    sent: [],
    stops: [],
    workspaceView: (p) => p,
    kernel: (code) => ({
      kind: "exec",
      status: "OK",
      output: "",
      stderr: "",
      value: code === "1+1" ? "2" : code,
      error: null,
    }),
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
          if (answer === "timeout") return { kind: "TimedOut" };
          response = answer;
          break;
        }
        case "interrupt":
          response = { kind: "interrupt", delivered: false };
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
