/**
 * A kernel's clients, by the `session_id` their websocket names, as Jupyter Server keeps
 * them: while a client's websocket is gone (a network blip, JupyterLab's `reconnect()`), what
 * the kernel says to it is kept, and replayed in order when a websocket of the same session
 * comes back. Without it a cell running across the blip never gets its execute_reply (the
 * front end shows `[*]` forever) and the output printed in the gap is lost.
 *
 * Kept within bounds, since a client that never returns must not cost the daemon: each
 * detached session holds at most `maxBytes` (past it the oldest output is dropped and the
 * replay says how much; replies and input prompts are kept, a client waits on them), for at
 * most `keepMs`, and a kernel keeps at most `maxDetached` detached sessions (the oldest goes).
 * A websocket that names no session cannot be recognised again and keeps nothing, until
 * the session is learnt from what it sends (`adopt`): notebook 6's and jupyter_server 1.x's
 * gateway clients drop the browser's `session_id`, while its messages still carry it.
 */
import type { Timers } from "../../../lib/clock.ts";

/** The part of a server websocket the hub uses. */
export interface KernelSocket {
  send(text: string): void;
  close(code: number, reason: string): void;
}

export interface ReplayLimits {
  /** What one detached session may hold (bytes of JSON text). */
  readonly maxBytes: number;
  /** How long a detached session is kept before it is forgotten. */
  readonly keepMs: number;
  /** Detached sessions one kernel keeps at most. */
  readonly maxDetached: number;
}

/** 32 MiB, 10 minutes, 4 sessions: a laptop's sleep or a VPN switch, not a week away. */
export const DEFAULT_REPLAY_LIMITS: ReplayLimits = {
  maxBytes: 32 * 1024 * 1024,
  keepMs: 10 * 60_000,
  maxDetached: 4,
};

/** One client session: its websocket when attached, what it missed when not. */
export interface Client {
  /**
   * To the websocket, or kept for the replay. `keep`: a reply or an input prompt, never
   * dropped for the byte bound (only output is).
   */
  send(text: string, keep?: boolean): void;
  /** Closes the attached websocket, if any. */
  close(code: number, reason: string): void;
}

interface Entry {
  readonly text: string;
  readonly keep: boolean;
}

interface ClientState extends Client {
  readonly key: string | null;
  socket: KernelSocket | null;
  entries: (Entry | null)[];
  /** Entries before this index hold no droppable output. */
  cursor: number;
  bytes: number;
  dropped: number;
  droppedBytes: number;
  /** Cancels the expiry of a detached session. */
  expiry: (() => void) | null;
  /** When it was detached, in detach order (the oldest goes first past `maxDetached`). */
  detachedSeq: number;
}

export interface Replayed {
  /** Output messages dropped while detached (over the byte bound). */
  readonly dropped: number;
  readonly droppedBytes: number;
  /** Whether this session was known (a reconnect), not a new one. */
  readonly known: boolean;
}

export interface ClientSessions {
  /**
   * A websocket of session `key` (null: it named none). A known session gets what it missed,
   * sent before this returns; its previous websocket, if still open, is closed (replaced).
   */
  attach(key: string | null, socket: KernelSocket): { client: Client; replayed: Replayed };
  /**
   * The anonymous `client` on `socket` turns out to be session `key` (named in its messages'
   * headers): the session's state, with what it missed sent to `socket` first, or null (it
   * stays anonymous) when that session has a websocket open already: a header is no reason
   * to close a live websocket.
   */
  adopt(
    client: Client,
    socket: KernelSocket,
    key: string,
  ): { client: Client; replayed: Replayed } | null;
  /** The websocket closed: its session keeps what follows, or is forgotten (no key). */
  detach(client: Client, socket: KernelSocket): void;
  /** To every session, attached or not (iopub). */
  broadcast(text: string): void;
  attachedCount(): number;
  size(): number;
  /** Closes every websocket and forgets every session. */
  closeAll(code: number, reason: string): void;
}

export function createClientSessions(
  limits: ReplayLimits,
  timers: Timers,
  onEmpty: () => void,
): ClientSessions {
  const byKey = new Map<string, ClientState>();
  const anonymous = new Set<ClientState>();
  let detaches = 0;

  function forget(c: ClientState): void {
    c.expiry?.();
    c.expiry = null;
    c.entries = [];
    if (c.key === null) anonymous.delete(c);
    else if (byKey.get(c.key) === c) byKey.delete(c.key);
    if (byKey.size + anonymous.size === 0) onEmpty();
  }

  /** Drops the oldest output until the session is within its bound again. */
  function trim(c: ClientState): void {
    while (c.bytes > limits.maxBytes && c.cursor < c.entries.length) {
      const e = c.entries[c.cursor];
      if (e != null && !e.keep) {
        c.entries[c.cursor] = null;
        c.bytes -= e.text.length;
        c.dropped += 1;
        c.droppedBytes += e.text.length;
      }
      c.cursor += 1;
    }
    // Only replies left and still over: a client that queued thousands of requests and
    // left. Nothing sensible remains to replay.
    if (c.bytes > limits.maxBytes) forget(c);
  }

  function create(key: string | null): ClientState {
    const c: ClientState = {
      key,
      socket: null,
      entries: [],
      cursor: 0,
      bytes: 0,
      dropped: 0,
      droppedBytes: 0,
      expiry: null,
      detachedSeq: 0,
      send(text, keep = false) {
        if (c.socket !== null) {
          c.socket.send(text);
          return;
        }
        if (c.key === null || (byKey.get(c.key) !== c && !anonymous.has(c))) return;
        c.entries.push({ text, keep });
        c.bytes += text.length;
        if (c.bytes > limits.maxBytes) trim(c);
      },
      close(code, reason) {
        c.socket?.close(code, reason);
      },
    };
    return c;
  }

  function detachedOldestFirst(): ClientState[] {
    return [...byKey.values()]
      .filter((c) => c.socket === null)
      .sort((a, b) => a.detachedSeq - b.detachedSeq);
  }

  function attach(
    key: string | null,
    socket: KernelSocket,
  ): { client: Client; replayed: Replayed } {
    const known = key === null ? undefined : byKey.get(key);
    const c = known ?? create(key);
    if (key === null) anonymous.add(c);
    else byKey.set(key, c);
    const replaced = c.socket;
    c.socket = null;
    // The same client came back before its old websocket's close was seen (a blip):
    // the old one is dead to the client, and closing it keeps one websocket per session.
    replaced?.close(1000, "replaced by a new websocket of this session");
    c.expiry?.();
    c.expiry = null;
    for (const e of c.entries) if (e !== null) socket.send(e.text);
    const replayed = { dropped: c.dropped, droppedBytes: c.droppedBytes, known: !!known };
    c.entries = [];
    c.cursor = 0;
    c.bytes = 0;
    c.dropped = 0;
    c.droppedBytes = 0;
    c.socket = socket;
    return { client: c, replayed };
  }

  return {
    attach,
    adopt(client, socket, key) {
      const c = client as ClientState;
      if (c.key !== null || c.socket !== socket) return null;
      const known = byKey.get(key);
      if (known !== undefined && known.socket !== null) return null;
      // Moved, not forgotten (forget() would tell the kernel it has no client left).
      anonymous.delete(c);
      c.socket = null;
      return attach(key, socket);
    },
    detach(client, socket) {
      const c = client as ClientState;
      if (c.socket !== socket) return; // replaced already
      c.socket = null;
      c.detachedSeq = ++detaches;
      if (c.key === null) {
        forget(c);
        return;
      }
      c.expiry = timers.after(limits.keepMs, () => forget(c));
      const detached = detachedOldestFirst();
      for (const old of detached.slice(0, Math.max(0, detached.length - limits.maxDetached)))
        forget(old);
    },
    broadcast(text) {
      for (const c of byKey.values()) c.send(text);
      for (const c of anonymous) c.send(text);
    },
    attachedCount() {
      let n = 0;
      for (const c of byKey.values()) if (c.socket !== null) n += 1;
      return n + anonymous.size;
    },
    size: () => byKey.size + anonymous.size,
    closeAll(code, reason) {
      for (const c of [...byKey.values(), ...anonymous]) {
        const socket = c.socket;
        c.socket = null;
        socket?.close(code, reason);
        forget(c);
      }
    },
  };
}
