/**
 * Shared by the gateway, worker and bench suites: a store in a temp dir, a gateway on a real
 * loopback socket with in-memory expectations, and a raw client that records every byte the
 * gateway sends (so tests can assert that nothing but `refused` ever comes back).
 */
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { type OpenedDatabase, openDatabase } from "../../src/adapters/store-sqlite/database.ts";
import type { StoreDeps } from "../../src/adapters/store-sqlite/deps.ts";
import { bindNonceBurner } from "../../src/adapters/store-sqlite/stores/nonce-burner.ts";
import type {
  GatewayEvent,
  GatewayExpectation,
  WorkerGateway,
} from "../../src/core/ports/worker-gateway.ts";
import { type Clock, systemTimers } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import {
  createWorkerGateway,
  type WorkerGatewayOptions,
} from "../../src/servers/worker-gateway/gateway.ts";
import {
  type Credential,
  loadOrCreateSigningKey,
  mintNonce,
  type SigningKey,
  signCredential,
} from "../../src/wire/credential.ts";
import { encodeFrame, MAX_CREDENTIAL_FRAME_BYTES } from "../../src/wire/worker-protocol.ts";
import { eventually } from "./eventually.ts";
import { makeTempDir } from "./temp-dir.ts";

/** The harness's own dir, removed by its close(). */
function harnessDir(): string {
  return makeTempDir("o4s-gateway-");
}

export interface Harness {
  readonly dir: string;
  readonly key: SigningKey;
  readonly db: OpenedDatabase;
  readonly store: StoreDeps;
  readonly clock: Clock;
  readonly expectations: Map<string, GatewayExpectation>;
  readonly events: GatewayEvent[];
  readonly log: ReturnType<typeof memoryLog>;
  gateway: WorkerGateway;
  /** Closes the gateway and the database, then opens both again on the same files. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export type GatewayOverrides = Partial<
  Omit<WorkerGatewayOptions, "store" | "key" | "clock" | "log" | "expectations" | "onEvent">
>;

export function startHarness(
  clock: Clock,
  overrides: GatewayOverrides = {},
  dir: string = harnessDir(),
): Harness {
  const key = loadOrCreateSigningKey(join(dir, "signing-key"));
  const expectations = new Map<string, GatewayExpectation>();
  const events: GatewayEvent[] = [];
  const log = memoryLog();
  let db = openDatabase(join(dir, "openai4s.db"));
  const open = (listen: string) =>
    createWorkerGateway({
      timers: systemTimers,
      listen,
      store: bindNonceBurner({ db: db.db, clock }),
      key,
      clock,
      log,
      expectations: { lookup: (id) => expectations.get(id) ?? null },
      refusalFloorMs: 40,
      handshakeTimeoutMs: 400,
      heartbeatIntervalMs: 200,
      tls: null,
      ...overrides,
      onEvent: (e) => events.push(e),
    });
  const harness: Harness = {
    dir,
    key,
    get db() {
      return db;
    },
    get store() {
      return { db: db.db, clock };
    },
    clock,
    expectations,
    events,
    log,
    gateway: open(overrides.listen ?? "127.0.0.1:0"),
    async restart() {
      const address = harness.gateway.address;
      await harness.gateway.close();
      db.close();
      db = openDatabase(join(dir, "openai4s.db"));
      harness.gateway = open(address); // same port: workers dial what their file says
    },
    async close() {
      await harness.gateway.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return harness;
}

export function credentialFor(
  key: SigningKey,
  claims: {
    readonly allocationId: string;
    readonly epoch: number;
    readonly rank?: number;
    readonly expiresAt: number;
  },
): Credential {
  return signCredential(key, {
    rank: 0,
    ...claims,
    nonce: mintNonce(randomBytes),
  });
}

export function credentialFrame(credential: Credential): Uint8Array {
  const frame = encodeFrame({ kind: "credential", credential }, MAX_CREDENTIAL_FRAME_BYTES);
  if (!frame) throw new Error("credential frame too large");
  return frame;
}

export function hostPort(address: string): { hostname: string; port: number } {
  const i = address.lastIndexOf(":");
  return { hostname: address.slice(0, i), port: Number(address.slice(i + 1)) };
}

export interface RawExchange {
  /** Every byte the gateway sent, in order. */
  readonly received: Uint8Array;
  /** The gateway closed the connection (rather than our deadline ending the wait). */
  readonly closedByPeer: boolean;
  /** From our last write to the first byte received; null when nothing came. */
  readonly firstByteAfterMs: number | null;
}

/**
 * Connects, writes `chunks`, optionally shuts down our write side, and records everything
 * until the gateway closes or `waitMs` passes.
 */
export async function rawExchange(
  address: string,
  chunks: readonly Uint8Array[],
  options: { readonly shutdown?: boolean; readonly waitMs?: number } = {},
): Promise<RawExchange> {
  const { hostname, port } = hostPort(address);
  const parts: Uint8Array[] = [];
  let firstAt: number | null = null;
  let closedByPeer = false;
  let resolveClosed: () => void = () => {};
  const closed = new Promise<void>((r) => {
    resolveClosed = r;
  });
  const socket = await Bun.connect({
    hostname,
    port,
    allowHalfOpen: true,
    socket: {
      binaryType: "uint8array",
      data(_s, chunk) {
        firstAt ??= performance.now();
        parts.push(new Uint8Array(chunk));
      },
      end(s) {
        closedByPeer = true;
        s.end();
        resolveClosed();
      },
      close() {
        closedByPeer = true;
        resolveClosed();
      },
      error() {
        resolveClosed();
      },
    },
  });
  for (const chunk of chunks) writeAll(socket, chunk);
  const sentAt = performance.now();
  if (options.shutdown) socket.shutdown();
  const deadline = Bun.sleep(options.waitMs ?? 3000);
  await Promise.race([closed, deadline]);
  socket.terminate();
  const size = parts.reduce((n, p) => n + p.length, 0);
  const received = new Uint8Array(size);
  let offset = 0;
  for (const p of parts) {
    received.set(p, offset);
    offset += p.length;
  }
  return {
    received,
    closedByPeer,
    firstByteAfterMs: firstAt === null ? null : (firstAt as number) - sentAt,
  };
}

/** Test-side writes are small; a short write here would be a test bug, so say so. */
function writeAll(socket: { write(b: Uint8Array): number }, bytes: Uint8Array): void {
  const written = socket.write(bytes);
  if (written !== bytes.length) throw new Error(`short test write: ${written}/${bytes.length}`);
}

export const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/**
 * Whether `predicate` holds within `timeoutMs`: `eventually` for the gateway tests that assert
 * the outcome with `expect(await until(...)).toBe(true)`.
 */
export async function until(predicate: () => boolean, timeoutMs = 5000): Promise<boolean> {
  try {
    return await eventually(predicate, { timeoutMs, intervalMs: 10 });
  } catch {
    return false;
  }
}

let resolvedPython: string | null = null;
/**
 * The real interpreter behind `python3`. On machines where `python3` is a version-manager shim
 * (a shell script), each start costs a second or more; tests that start many kernels use the
 * executable it resolves to.
 */
export function realPython(): string {
  if (resolvedPython === null) {
    const r = Bun.spawnSync(["python3", "-c", "import sys; print(sys.executable)"]);
    resolvedPython = r.stdout.toString().trim() || "python3";
  }
  return resolvedPython;
}
