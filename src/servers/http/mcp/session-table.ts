/**
 * The MCP sessions the daemon holds: each a server and its transport, owned by the caller
 * that initialized it. Bounded per caller and in total: at the bound the caller's least
 * recently used session with no tool call running is closed (its client re-initializes, as
 * the protocol has it after a 404); when every one is busy, the new one is refused. A hostile
 * client can hold at most its own share, and never another's.
 */

import type { StreamableHTTPTransport } from "@hono/mcp";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";

export interface McpSessionEntry {
  readonly id: string;
  readonly owner: string;
  readonly server: Server;
  readonly transport: StreamableHTTPTransport;
  /** Tool calls running now: a busy session is never the one evicted. */
  readonly busy: () => number;
  lastUsedMs: number;
}

export interface SessionTableOptions {
  readonly maxPerOwner: number;
  readonly maxTotal: number;
  /** A session not used for this long is closed at the next admission. */
  readonly idleMs: number;
  readonly now: () => number;
}

export type Admission =
  | { readonly kind: "Admitted" }
  | { readonly kind: "Full"; readonly message: string };

export function createSessionTable(options: SessionTableOptions) {
  const entries = new Map<string, McpSessionEntry>();

  function close(entry: McpSessionEntry): void {
    entries.delete(entry.id);
    // The transport's onclose deletes it too; closing aborts its calls in flight.
    void entry.server.close().catch(() => {});
  }

  function evictIdleOne(candidates: readonly McpSessionEntry[]): boolean {
    const idle = candidates
      .filter((e) => e.busy() === 0)
      .sort((a, b) => a.lastUsedMs - b.lastUsedMs);
    const oldest = idle[0];
    if (oldest === undefined) return false;
    close(oldest);
    return true;
  }

  return {
    get(id: string, owner: string): McpSessionEntry | null {
      const entry = entries.get(id);
      // Another caller's session id answers as an unknown one: existence is not leaked.
      if (entry === undefined || entry.owner !== owner) return null;
      entry.lastUsedMs = options.now();
      return entry;
    },
    /** Room for one more session of `owner`, made by closing idle ones if need be. */
    admit(owner: string): Admission {
      const now = options.now();
      for (const e of [...entries.values()]) {
        if (e.busy() === 0 && now - e.lastUsedMs > options.idleMs) close(e);
      }
      const own = [...entries.values()].filter((e) => e.owner === owner);
      if (own.length >= options.maxPerOwner && !evictIdleOne(own)) {
        return {
          kind: "Full",
          message: `this caller holds ${own.length} MCP sessions, the most allowed, each with a tool call running; end one (DELETE /mcp) or wait`,
        };
      }
      if (entries.size >= options.maxTotal && !evictIdleOne([...entries.values()])) {
        return {
          kind: "Full",
          message: `the daemon holds ${entries.size} MCP sessions, its most, all busy; try again later`,
        };
      }
      return { kind: "Admitted" };
    },
    add(entry: McpSessionEntry): void {
      entries.set(entry.id, entry);
    },
    remove(id: string): void {
      entries.delete(id);
    },
    size(): number {
      return entries.size;
    },
    closeAll(): void {
      for (const e of [...entries.values()]) close(e);
    },
  };
}

export type SessionTable = ReturnType<typeof createSessionTable>;
