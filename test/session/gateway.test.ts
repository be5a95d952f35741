/**
 * The worker gateway on a real loopback socket. Every refusal must be exactly the bytes
 * `refused` followed by a close, with no byte before it, and no sooner than the floor.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { createWorkload } from "../../src/adapters/store-sqlite/ops/create-workload.ts";
import { getAllocation } from "../../src/adapters/store-sqlite/ops/get-allocation.ts";
import { getWorkload } from "../../src/adapters/store-sqlite/ops/get-workload.ts";
import { mintAttempt } from "../../src/adapters/store-sqlite/ops/mint-attempt.ts";
import { dialGateway, type Link, type Welcome } from "../../src/apps/worker/gateway-link.ts";
import type { SubmissionToken } from "../../src/core/models.ts";
import {
  WORKER_LISTEN_ENV,
  workerGatewayListenFromEnv,
} from "../../src/core/ports/worker-gateway.ts";
import { manualClock, manualTimeline, systemTimers, type Timers } from "../../src/lib/clock.ts";
import { type Credential, signingKeyFromBytes } from "../../src/wire/credential.ts";
import {
  encodeFrame,
  parseGatewayMessage,
  REFUSED,
  type WorkerMessage,
  type WorkerRequest,
  type WorkerResponse,
} from "../../src/wire/worker-protocol.ts";
import {
  credentialFor,
  credentialFrame,
  type GatewayOverrides,
  type Harness,
  hostPort,
  rawExchange,
  startHarness,
  text,
  until,
} from "../support/gateway-harness.ts";

const NOW = 1_700_000_000_000;
const FLOOR_MS = 40;
/** setTimeout may fire a hair early against performance.now(); never by more than this. */
const TIMER_SLACK_MS = 2;

const harnesses: Harness[] = [];
const links: Link[] = [];
afterEach(async () => {
  for (const l of links.splice(0)) l.terminate();
  for (const h of harnesses.splice(0)) await h.close();
});

function setup(overrides: GatewayOverrides = {}): Harness {
  const h = startHarness(manualClock(NOW), { refusalFloorMs: FLOOR_MS, ...overrides });
  h.expectations.set("alloc-1", { epoch: 2, ranks: 2, fenced: false });
  harnesses.push(h);
  return h;
}

/**
 * Real timers that count the handshake deadlines the gateway arms, one per connection it
 * takes into handshake: the observable that orders a test's connects without a sleep.
 */
function handshakesAccepted(handshakeTimeoutMs: number): Timers & { count(): number } {
  let armed = 0;
  return {
    after(delayMs, fn) {
      if (delayMs === handshakeTimeoutMs) armed++;
      return systemTimers.after(delayMs, fn);
    },
    count: () => armed,
  };
}

function good(h: Harness, claims: { epoch?: number; rank?: number; allocationId?: string } = {}) {
  return credentialFor(h.key, {
    allocationId: "alloc-1",
    epoch: 2,
    rank: 0,
    expiresAt: h.clock.now() + 60_000,
    ...claims,
  });
}

async function expectRefused(
  h: Harness,
  chunks: readonly Uint8Array[],
  options: { shutdown?: boolean } = {},
): Promise<number> {
  const r = await rawExchange(h.gateway.address, chunks, options);
  // Exactly the word: no frame, no byte before it, nothing after it, then the close.
  expect(text(r.received)).toBe(REFUSED);
  expect(r.closedByPeer).toBe(true);
  expect(r.firstByteAfterMs).not.toBeNull();
  expect(r.firstByteAfterMs!).toBeGreaterThanOrEqual(FLOOR_MS - TIMER_SLACK_MS);
  return r.firstByteAfterMs!;
}

/** Presents a credential on a raw socket and returns the parsed frames that came back. */
async function presentRaw(h: Harness, credential: Credential): Promise<unknown[]> {
  const r = await rawExchange(h.gateway.address, [credentialFrame(credential)], { waitMs: 250 });
  const frames: unknown[] = [];
  let offset = 0;
  const view = new DataView(r.received.buffer);
  while (offset + 4 <= r.received.length) {
    const size = view.getUint32(offset);
    frames.push(JSON.parse(text(r.received.subarray(offset + 4, offset + 4 + size))));
    offset += 4 + size;
  }
  // Whatever came back is whole frames: no stray bytes, no `refused`.
  expect(offset).toBe(r.received.length);
  return frames;
}

interface FakeWorker {
  readonly welcome: Welcome;
  readonly link: Link;
  readonly frames: unknown[];
  closedReason(): string | null;
}

/** A worker made of the real dialing code, answering requests with `answer`. */
async function fakeWorker(
  h: Harness,
  credential: Credential,
  answer: (request: WorkerRequest) => WorkerResponse | null = () => null,
): Promise<FakeWorker> {
  const outcome = await dialGateway(hostPort(h.gateway.address), credential, {
    verdictTimeoutMs: 3000,
    timers: systemTimers,
  });
  if (outcome.kind !== "Welcomed") throw new Error(`not welcomed: ${JSON.stringify(outcome)}`);
  const { link, welcome } = outcome;
  links.push(link);
  const frames: unknown[] = [];
  let closed: string | null = null;
  link.attach({
    onFrame(frame) {
      frames.push(frame);
      const message = parseGatewayMessage(frame);
      if (message?.kind !== "request") return;
      const response = answer(message.request);
      if (response) link.send({ kind: "response", id: message.id, response });
    },
    onClose(reason) {
      closed = reason;
    },
  });
  return { welcome, link, frames, closedReason: () => closed };
}

const echoExec = (request: WorkerRequest): WorkerResponse | null =>
  request.kind === "exec"
    ? {
        kind: "exec",
        status: "OK",
        result: { "text/plain": request.code },
        error: null,
        kernelRestarted: false,
      }
    : null;

describe("refusals", () => {
  test("nothing is sent before a credential: a silent peer hears only `refused`, at the deadline", async () => {
    const h = setup({ handshakeTimeoutMs: 300 });
    const r = await rawExchange(h.gateway.address, [], { waitMs: 3000 });
    expect(text(r.received)).toBe(REFUSED);
    expect(r.closedByPeer).toBe(true);
    // The first byte is the refusal itself, sent no earlier than deadline + floor.
    expect(r.firstByteAfterMs!).toBeGreaterThanOrEqual(300 + FLOOR_MS - TIMER_SLACK_MS);
  });

  test("forged (signed with another key)", async () => {
    const h = setup();
    const stranger = signingKeyFromBytes(randomBytes(32));
    const forged = credentialFor(stranger, {
      allocationId: "alloc-1",
      epoch: 2,
      expiresAt: NOW + 60_000,
    });
    await expectRefused(h, [credentialFrame(forged)]);
    expect(h.gateway.connected("alloc-1", 2).size).toBe(0);
  });

  test("expired", async () => {
    const h = setup();
    const credential = good(h);
    (h.clock as ReturnType<typeof manualClock>).set(credential.expiresAt);
    await expectRefused(h, [credentialFrame(credential)]);
  });

  test("replayed: the second presentation of an accepted credential", async () => {
    const h = setup();
    const credential = good(h);
    const frames = await presentRaw(h, credential);
    expect(parseGatewayMessage(frames[0])?.kind).toBe("welcome");
    await expectRefused(h, [credentialFrame(credential)]);
  });

  test("replayed across a gateway restart on the same database (the burn is durable)", async () => {
    const h = setup();
    const credential = good(h);
    expect(parseGatewayMessage((await presentRaw(h, credential))[0])?.kind).toBe("welcome");
    await h.restart();
    await expectRefused(h, [credentialFrame(credential)]);
    // The restarted gateway does accept a fresh credential: the refusal was the replay.
    expect(parseGatewayMessage((await presentRaw(h, good(h)))[0])?.kind).toBe("welcome");
  });

  test("wrong epoch (a previous incarnation's credential)", async () => {
    const h = setup();
    await expectRefused(h, [credentialFrame(good(h, { epoch: 1 }))]);
  });

  test("wrong allocation (one the daemon does not expect)", async () => {
    const h = setup();
    await expectRefused(h, [credentialFrame(good(h, { allocationId: "alloc-2" }))]);
  });

  test("fenced allocation, and a rank beyond the allocation's", async () => {
    const h = setup();
    await expectRefused(h, [credentialFrame(good(h, { rank: 2 }))]);
    h.expectations.set("alloc-1", { epoch: 2, ranks: 2, fenced: true });
    await expectRefused(h, [credentialFrame(good(h))]);
  });

  test("truncated frame, then the peer shuts down its side", async () => {
    const h = setup();
    const frame = credentialFrame(good(h));
    await expectRefused(h, [frame.subarray(0, frame.length - 10)], { shutdown: true });
  });

  test("truncated frame left hanging: refused at the handshake deadline", async () => {
    const h = setup({ handshakeTimeoutMs: 200 });
    const frame = credentialFrame(good(h));
    const after = await expectRefused(h, [frame.subarray(0, 20)]);
    expect(after).toBeGreaterThanOrEqual(200 + FLOOR_MS - TIMER_SLACK_MS);
  });

  test("truncated credential (a whole frame, a signature cut short)", async () => {
    const h = setup();
    const credential = good(h);
    const cut = { ...credential, signature: credential.signature.slice(0, 40) };
    const frame = encodeFrame({ kind: "credential", credential: cut })!;
    await expectRefused(h, [frame]);
  });

  test("oversized: a first frame announcing more than the credential cap", async () => {
    const h = setup();
    const header = new Uint8Array(4);
    new DataView(header.buffer).setUint32(0, 5000);
    await expectRefused(h, [header, new Uint8Array(1000).fill(0x7b)]);
  });

  test("garbage: random bytes, non-JSON, invalid UTF-8, an empty frame, a JSON non-credential", async () => {
    const h = setup();
    const frameOf = (payload: Uint8Array) => {
      const out = new Uint8Array(4 + payload.length);
      new DataView(out.buffer).setUint32(0, payload.length);
      out.set(payload, 4);
      return out;
    };
    const cases = [
      randomBytes(64),
      new TextEncoder().encode("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
      frameOf(new TextEncoder().encode("not json")),
      frameOf(new Uint8Array([0x22, 0xff, 0xfe, 0x22])),
      new Uint8Array(4),
      encodeFrame({ kind: "heartbeat" })!,
    ];
    const floors = await Promise.all(cases.map((c) => expectRefused(h, [c])));
    expect(floors.length).toBe(cases.length);
  });

  test("a valid credential followed by extra bytes is refused and NOT burned", async () => {
    const h = setup();
    const credential = good(h);
    await expectRefused(h, [credentialFrame(credential), new Uint8Array([1])]);
    expect(parseGatewayMessage((await presentRaw(h, credential))[0])?.kind).toBe("welcome");
  });

  test("refusals of every kind wait for the same floor", async () => {
    const h = setup({ refusalFloorMs: 120 });
    const stranger = signingKeyFromBytes(randomBytes(32));
    const replayed = good(h);
    await presentRaw(h, replayed);
    const kinds = [
      credentialFrame(
        credentialFor(stranger, { allocationId: "alloc-1", epoch: 2, expiresAt: NOW + 1000 }),
      ),
      credentialFrame(good(h, { epoch: 1 })),
      credentialFrame(good(h, { allocationId: "nope" })),
      credentialFrame(replayed),
      randomBytes(16),
    ];
    for (const k of kinds) {
      const r = await rawExchange(h.gateway.address, [k]);
      expect(text(r.received)).toBe(REFUSED);
      expect(r.firstByteAfterMs!).toBeGreaterThanOrEqual(120 - TIMER_SLACK_MS);
    }
  });

  test("past maxPendingHandshakes the oldest silent peer is closed without a byte", async () => {
    const accepted = handshakesAccepted(5000);
    const h = setup({ maxPendingHandshakes: 1, handshakeTimeoutMs: 5000, timers: accepted });
    const timed = (p: ReturnType<typeof rawExchange>) => {
      const started = performance.now();
      return p.then((r) => ({ ...r, elapsedMs: performance.now() - started }));
    };
    const hanging = timed(rawExchange(h.gateway.address, [], { waitMs: 3000 }));
    // The newcomer must come second: wait until the gateway took the first into handshake.
    expect(await until(() => accepted.count() === 1)).toBe(true);
    const newcomer = timed(rawExchange(h.gateway.address, [], { waitMs: 600 }));
    const old = await hanging;
    expect(old.received.length).toBe(0);
    expect(old.elapsedMs).toBeLessThan(2500); // closed by the gateway, long before our deadline
    const fresh = await newcomer;
    expect(fresh.received.length).toBe(0);
    expect(fresh.elapsedMs).toBeGreaterThanOrEqual(550); // kept open until our own deadline
  });

  test("idle peers holding every handshake slot cannot keep a worker out", async () => {
    const accepted = handshakesAccepted(5000);
    const h = setup({ maxPendingHandshakes: 4, handshakeTimeoutMs: 5000, timers: accepted });
    const squatters = Array.from({ length: 8 }, () =>
      rawExchange(h.gateway.address, [], { waitMs: 800 }),
    );
    // The worker must come after every squatter: all eight were taken into handshake.
    expect(await until(() => accepted.count() === 8)).toBe(true);
    const frames = await presentRaw(h, good(h, { rank: 0 }));
    expect(parseGatewayMessage(frames[0])).toMatchObject({ kind: "welcome", rank: 0 });
    await Promise.all(squatters);
  });
});

describe("accepted connections", () => {
  test("the first byte after a good credential is a welcome frame with a resume credential", async () => {
    const h = setup();
    const frames = await presentRaw(h, good(h, { rank: 1 }));
    const welcome = parseGatewayMessage(frames[0]);
    expect(welcome).toMatchObject({ kind: "welcome", allocationId: "alloc-1", epoch: 2, rank: 1 });
    if (welcome?.kind !== "welcome") throw new Error("unreachable");
    expect(welcome.resume).toMatchObject({ allocationId: "alloc-1", epoch: 2, rank: 1 });
    expect(h.events).toContainEqual({
      kind: "WorkerConnected",
      allocationId: "alloc-1",
      epoch: 2,
      rank: 1,
    });
  });

  test("rendezvous is keyed by (allocation, epoch): a previous epoch never satisfies a wait", async () => {
    const h = setup();
    const old = new AbortController();
    const waitOld = h.gateway.waitForRanks("alloc-1", 1, 1, old.signal);
    const waitCurrent = h.gateway.waitForRanks("alloc-1", 2, 2);
    await expectRefused(h, [credentialFrame(good(h, { epoch: 1 }))]); // the latecomer
    await fakeWorker(h, good(h, { rank: 0 }));
    await fakeWorker(h, good(h, { rank: 1 }));
    expect(await waitCurrent).toEqual({ kind: "Connected" });
    expect([...h.gateway.connected("alloc-1", 2)].sort()).toEqual([0, 1]);
    expect(h.gateway.connected("alloc-1", 1).size).toBe(0);
    old.abort();
    expect(await waitOld).toEqual({ kind: "Aborted" });
    // Already satisfied: resolves at once.
    expect(await h.gateway.waitForRanks("alloc-1", 2, 2)).toEqual({ kind: "Connected" });
  });

  test("garbage peers do not disturb a concurrent good connection", async () => {
    const h = setup();
    const worker = await fakeWorker(h, good(h), echoExec);
    const garbage = Array.from({ length: 5 }, () =>
      rawExchange(h.gateway.address, [randomBytes(300)], { waitMs: 2000 }),
    );
    const answer = await h.gateway.request("alloc-1", 2, 0, { kind: "exec", code: "1+1" }, 2000);
    expect(answer).toMatchObject({
      kind: "Answered",
      response: { result: { "text/plain": "1+1" } },
    });
    for (const g of await Promise.all(garbage)) expect(text(g.received)).toBe(REFUSED);
    expect(worker.closedReason()).toBeNull();
  });

  test("an authenticated peer that sends an oversized frame or an unknown message is dropped alone", async () => {
    const h = setup({ maxFrameBytes: 1000 });
    const a = await fakeWorker(h, good(h, { rank: 0 }), echoExec);
    const b = await fakeWorker(h, good(h, { rank: 1 }), echoExec);
    // The fake worker's own cap is the default 1 MiB; the gateway's is 1000 bytes.
    const big = { kind: "error", message: "x".repeat(2000) } as const;
    expect(a.link.send({ kind: "response", id: 1, response: big })).toBe(true);
    expect(await until(() => a.closedReason() !== null)).toBe(true);
    expect(h.events).toContainEqual(
      expect.objectContaining({
        kind: "WorkerDisconnected",
        rank: 0,
        reason: expect.stringContaining("protocol violation: frame of"),
      }),
    );
    const c = await fakeWorker(h, a.welcome.resume, echoExec);
    expect(c.link.send({ kind: "bogus" } as unknown as WorkerMessage)).toBe(true);
    expect(await until(() => c.closedReason() !== null)).toBe(true);
    expect(h.gateway.connected("alloc-1", 2)).toEqual(new Set([1]));
    const answer = await h.gateway.request(
      "alloc-1",
      2,
      1,
      { kind: "exec", code: "still here" },
      2000,
    );
    expect(answer).toMatchObject({
      kind: "Answered",
      response: { result: { "text/plain": "still here" } },
    });
    expect(b.closedReason()).toBeNull();
  });

  test("request outcomes: NotConnected, TooLarge, TimedOut, WorkerError, Disconnected", async () => {
    const h = setup({ maxFrameBytes: 10_000 });
    expect(await h.gateway.request("alloc-1", 2, 0, { kind: "interrupt" }, 100)).toEqual({
      kind: "NotConnected",
    });
    const silent = await fakeWorker(h, good(h, { rank: 0 }), () => null);
    expect(
      (await h.gateway.request("alloc-1", 2, 0, { kind: "exec", code: "x".repeat(20_000) }, 100))
        .kind,
    ).toBe("TooLarge");
    expect(await h.gateway.request("alloc-1", 2, 0, { kind: "interrupt" }, 100)).toEqual({
      kind: "TimedOut",
    });
    await fakeWorker(h, good(h, { rank: 1 }), () => ({ kind: "error", message: "no such thing" }));
    expect(await h.gateway.request("alloc-1", 2, 1, { kind: "interrupt" }, 2000)).toEqual({
      kind: "WorkerError",
      message: "no such thing",
    });
    // Pending from the moment request() returns: no wait needed before the worker goes away.
    const pending = h.gateway.request("alloc-1", 2, 0, { kind: "interrupt" }, 5000);
    silent.link.terminate();
    expect(await pending).toEqual({ kind: "Disconnected" });
  });

  test("a response of the wrong kind is a protocol violation", async () => {
    const h = setup();
    const w = await fakeWorker(h, good(h), () => ({ kind: "interrupt", delivered: true }));
    const outcome = await h.gateway.request("alloc-1", 2, 0, { kind: "exec", code: "1" }, 2000);
    expect(outcome).toEqual({ kind: "Disconnected" });
    expect(await until(() => w.closedReason() !== null)).toBe(true);
  });

  test("heartbeats update last-seen and are acked with a fresh resume credential", async () => {
    const h = setup();
    const clock = h.clock as ReturnType<typeof manualClock>;
    const w = await fakeWorker(h, good(h));
    const connectedAt = h.gateway.connection("alloc-1", 2, 0)!.lastSeenAt;
    clock.advance(100);
    w.link.send({ kind: "heartbeat" });
    expect(await until(() => w.frames.length === 1)).toBe(true);
    const ack = parseGatewayMessage(w.frames[0]);
    expect(ack?.kind).toBe("heartbeat_ack");
    if (ack?.kind !== "heartbeat_ack") throw new Error("unreachable");
    expect(ack.resume.nonce).not.toBe(w.welcome.resume.nonce);
    expect(h.gateway.connection("alloc-1", 2, 0)!.lastSeenAt).toBe(connectedAt + 100);
  });

  test("a connection silent for three heartbeat intervals is dropped, on the injected timers", async () => {
    // Clock and timers are one manual timeline: the liveness sweep runs when the test moves
    // time, not when a real interval happens to fire.
    const timeline = manualTimeline(NOW);
    const h = startHarness(timeline, {
      refusalFloorMs: FLOOR_MS,
      heartbeatIntervalMs: 50,
      timers: timeline,
    });
    h.expectations.set("alloc-1", { epoch: 2, ranks: 2, fenced: false });
    harnesses.push(h);
    const w = await fakeWorker(h, good(h));
    timeline.advance(3 * 50); // the sweeps at 50, 100 and 150 ms: silent for exactly three
    expect(h.gateway.connected("alloc-1", 2)).toEqual(new Set([0]));
    timeline.advance(50); // the sweep at 200 ms: silent for longer than three intervals
    expect(h.gateway.connected("alloc-1", 2).size).toBe(0);
    expect(await until(() => w.closedReason() !== null)).toBe(true);
    expect(h.events).toContainEqual(
      expect.objectContaining({ kind: "WorkerDisconnected", reason: "heartbeat timeout" }),
    );
  });

  test("a lost worker resumes with its resume credential, once", async () => {
    const h = setup();
    const first = await fakeWorker(h, good(h));
    const resume = first.welcome.resume;
    first.link.terminate();
    expect(await until(() => h.gateway.connected("alloc-1", 2).size === 0)).toBe(true);
    const second = await fakeWorker(h, resume, echoExec);
    expect(second.welcome.rank).toBe(0);
    expect(h.gateway.connected("alloc-1", 2)).toEqual(new Set([0]));
    await expectRefused(h, [credentialFrame(resume)]); // burned like any other
  });

  test("a resume while the old connection is still open replaces it, and the rank stays connected", async () => {
    const h = setup();
    const first = await fakeWorker(h, good(h));
    // The old connection is presumed half-open: the worker dialled again without it closing.
    const second = await fakeWorker(h, first.welcome.resume, echoExec);
    expect(await until(() => first.closedReason() !== null)).toBe(true);
    expect(h.gateway.connected("alloc-1", 2)).toEqual(new Set([0]));
    const answer = await h.gateway.request("alloc-1", 2, 0, { kind: "exec", code: "again" }, 2000);
    expect(answer).toMatchObject({
      kind: "Answered",
      response: { result: { "text/plain": "again" } },
    });
    expect(second.closedReason()).toBeNull();
  });

  test("stop tells the workers, disconnects them, and refuses their resume", async () => {
    const h = setup();
    const w = await fakeWorker(h, good(h));
    expect(h.gateway.stop("alloc-1", 2, "USER_CANCELLED")).toBe(1);
    expect(h.gateway.connected("alloc-1", 2).size).toBe(0);
    expect(await until(() => w.frames.length > 0)).toBe(true);
    expect(parseGatewayMessage(w.frames[0])).toEqual({ kind: "stop", reason: "USER_CANCELLED" });
    await expectRefused(h, [credentialFrame(w.welcome.resume)]);
  });

  test("close drops workers without telling them to stop, and ends waits", async () => {
    const h = setup();
    const w = await fakeWorker(h, good(h));
    const wait = h.gateway.waitForRanks("alloc-1", 2, 2);
    const pending = h.gateway.request("alloc-1", 2, 0, { kind: "interrupt" }, 5000);
    await h.gateway.close();
    expect(await wait).toEqual({ kind: "Closed" });
    expect(await pending).toEqual({ kind: "Disconnected" });
    expect(await until(() => w.closedReason() !== null)).toBe(true);
    expect(w.frames.map((f) => parseGatewayMessage(f)?.kind)).not.toContain("stop");
  });
});

describe("store-backed expectations", () => {
  test("a heartbeat is not user activity: lastActiveAt never moves", async () => {
    const h = setup();
    const clock = h.clock as ReturnType<typeof manualClock>;
    const store = h.store;
    createWorkload(store, {
      id: "w1",
      kind: "SESSION",
      name: "s",
      profile: "p",
      spec: {},
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
    });
    const minted = mintAttempt(store, {
      workloadId: "w1",
      allocationId: "alloc-store",
      token: `o4s-${"a".repeat(26)}` as SubmissionToken,
      expectedEpoch: 0,
      message: "test",
    });
    if (minted.kind !== "Minted") throw new Error(minted.message);
    h.expectations.clear();
    // What the session engine will provide: the allocation as the store has it.
    const lookup = (id: string) => {
      const a = getAllocation(h.store, id);
      return a ? { epoch: a.epoch, ranks: 1, fenced: a.phase === "STOPPING" } : null;
    };
    h.expectations.set("alloc-store", lookup("alloc-store")!);
    const before = getWorkload(store, "w1")!.lastActiveAt;
    const w = await fakeWorker(
      h,
      credentialFor(h.key, {
        allocationId: "alloc-store",
        epoch: minted.allocation.epoch,
        expiresAt: NOW + 60_000,
      }),
    );
    for (let i = 0; i < 5; i++) {
      clock.advance(1000);
      w.link.send({ kind: "heartbeat" });
    }
    expect(await until(() => w.frames.length === 5)).toBe(true);
    expect(h.gateway.connection("alloc-store", 1, 0)!.lastSeenAt).toBe(NOW + 5000);
    expect(getWorkload(store, "w1")!.lastActiveAt).toBe(before);
  });
});

describe("OPENAI4S_WORKER_LISTEN", () => {
  test("unset or empty keeps the gateway closed; HOST:PORT opens it; anything else is invalid", () => {
    expect(workerGatewayListenFromEnv({})).toEqual({ kind: "Disabled" });
    expect(workerGatewayListenFromEnv({ [WORKER_LISTEN_ENV]: "" })).toEqual({ kind: "Disabled" });
    expect(workerGatewayListenFromEnv({ [WORKER_LISTEN_ENV]: "0.0.0.0:7070" })).toEqual({
      kind: "Enabled",
      listen: "0.0.0.0:7070",
    });
    expect(workerGatewayListenFromEnv({ [WORKER_LISTEN_ENV]: "[::1]:7070" })).toEqual({
      kind: "Enabled",
      listen: "[::1]:7070",
    });
    expect(workerGatewayListenFromEnv({ [WORKER_LISTEN_ENV]: "head-node.example:7070" }).kind).toBe(
      "Enabled",
    );
    for (const bad of ["7070", "host", "host:", "host:99999", "a b:1", "::1:7070", "host:70 70"]) {
      expect(workerGatewayListenFromEnv({ [WORKER_LISTEN_ENV]: bad }).kind).toBe("Invalid");
    }
  });
});

describe("kernel status and exec output from the worker", () => {
  test("a kernel status is recorded and announced once per change; an oversized one drops the worker", async () => {
    const h = setup();
    const w = await fakeWorker(h, good(h));
    const dead = { state: "dead", message: "the Python kernel died (exit code 1)" } as const;
    expect(w.link.send({ kind: "kernel_status", status: dead })).toBe(true);
    expect(w.link.send({ kind: "kernel_status", status: dead })).toBe(true);
    expect(await until(() => h.gateway.connection("alloc-1", 2, 0)?.kernel?.state === "dead")).toBe(
      true,
    );
    // A heartbeat round trip: everything sent before it has been handled.
    expect(w.link.send({ kind: "heartbeat" })).toBe(true);
    await until(() => w.frames.some((f) => (f as { kind?: string }).kind === "heartbeat_ack"));
    expect(h.events.filter((e) => e.kind === "KernelStatus")).toEqual([
      { kind: "KernelStatus", allocationId: "alloc-1", epoch: 2, rank: 0, status: dead },
    ]);
    expect(
      w.link.send({
        kind: "kernel_status",
        status: { state: "dead", message: "x".repeat(5000) },
      } as never),
    ).toBe(true);
    expect(await until(() => w.closedReason() !== null)).toBe(true);
  });

  test("output between requests is announced with the cell it follows, whoever asked nothing", async () => {
    const h = setup();
    const w = await fakeWorker(h, good(h));
    const event = { type: "stream", name: "stdout", text: "from a thread\n" } as const;
    expect(w.link.send({ kind: "kernel_output", cell: "cell-7", event })).toBe(true);
    expect(w.link.send({ kind: "kernel_output", event })).toBe(true);
    expect(w.link.send({ kind: "heartbeat" })).toBe(true);
    await until(() => w.frames.some((f) => (f as { kind?: string }).kind === "heartbeat_ack"));
    const base = {
      kind: "KernelOutput" as const,
      allocationId: "alloc-1",
      epoch: 2,
      rank: 0,
      event,
    };
    expect(h.events.filter((e) => e.kind === "KernelOutput")).toEqual([
      { ...base, cell: "cell-7" },
      { ...base, cell: null },
    ]);
    expect(w.closedReason()).toBeNull();
  });

  test("exec output events reach the requester in order, before the answer", async () => {
    const h = setup();
    const w = await fakeWorker(h, good(h));
    const seen: unknown[] = [];
    const answer = h.gateway.request("alloc-1", 2, 0, { kind: "exec", code: "x" }, 3000, {
      onEvent: (e) => seen.push(e),
    });
    const request = await until(() =>
      w.frames.some((f) => (f as { kind?: string }).kind === "request"),
    );
    expect(request).toBe(true);
    const id = (w.frames.find((f) => (f as { kind?: string }).kind === "request") as { id: number })
      .id;
    w.link.send({ kind: "event", id, event: { type: "stream", name: "stdout", text: "a" } });
    w.link.send({
      kind: "event",
      id,
      event: { type: "display_data", data: { "text/plain": "b" } },
    });
    w.link.send({
      kind: "response",
      id,
      response: { kind: "exec", status: "OK", result: null, error: null, kernelRestarted: false },
    });
    expect(await answer).toMatchObject({ kind: "Answered" });
    expect(seen).toEqual([
      { type: "stream", name: "stdout", text: "a" },
      { type: "display_data", data: { "text/plain": "b" } },
    ]);
  });
});
