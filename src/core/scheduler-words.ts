/**
 * A scheduler's refusal names the site's placement: its queues, service classes and
 * accounts (a queue name that does not exist, spelt out). The admin needs those words to fix
 * cluster.toml; a principal must not read them (they never leave the daemon). Before, the one hidden form was all that was
 * stored, so the admin's `show` said "invalid placement specified: [hidden]" too, and the
 * scheduler's words were only in the daemon's log (issue 35).
 *
 * Both forms are made here, once, when the message is born; every door then picks one per
 * caller with `messageFor`, so no door rewrites (or forgets to).
 */
import type { TransitionEvent, Workload } from "./models.ts";
import type { Caller } from "./principals.ts";

export interface MessageForms {
  /** What a principal reads: the site's names hidden. */
  readonly message: string;
  /** The scheduler's own words when they differ from `message`; null: they are the same. */
  readonly messageAdmin: string | null;
}

/** The hidden form and the scheduler's own words, from one message and the site's rewrite. */
export function messageForms(said: string, hide: (message: string) => string): MessageForms {
  const hidden = hide(said);
  return { message: hidden, messageAdmin: hidden === said ? null : said };
}

/** The form of a stored message this caller reads: the admin the scheduler's words. */
export function messageFor(
  caller: Caller,
  message: string | null,
  messageAdmin: string | null | undefined,
): string | null {
  return caller.kind === "Admin" && messageAdmin != null ? messageAdmin : message;
}

/** The workload as this caller reads it: `message` in the caller's form, no second form. */
export function workloadFor(caller: Caller, workload: Workload): Workload {
  if (workload.messageAdmin == null) return workload;
  const { messageAdmin: _dropped, ...rest } = workload;
  return { ...rest, message: messageFor(caller, workload.message, workload.messageAdmin) };
}

/** The same for one of its events. */
export function eventFor(caller: Caller, event: TransitionEvent): TransitionEvent {
  if (event.messageAdmin == null) return event;
  const { messageAdmin: _dropped, ...rest } = event;
  return { ...rest, message: messageFor(caller, event.message, event.messageAdmin) };
}
