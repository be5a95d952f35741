/** @jsxImportSource hono/jsx */
/** The frame every /ui page shares: navigation, the stylesheet, and the page's content. */
import type { Child } from "hono/jsx";
import { STYLES } from "./styles.ts";

export type UiSection = "workloads" | "cluster" | "sessions" | "login";

export interface LayoutProps {
  readonly title: string;
  readonly section: UiSection;
  readonly nonce: string;
  /** Absent on the login page and on the unix socket (no login to end). */
  readonly logoutCsrf?: string | undefined;
  readonly children?: Child;
}

const LINKS: readonly {
  readonly section: UiSection;
  readonly href: string;
  readonly label: string;
}[] = [
  { section: "workloads", href: "/ui/workloads", label: "Workloads" },
  { section: "sessions", href: "/ui/sessions", label: "Sessions" },
  { section: "cluster", href: "/ui/cluster", label: "Cluster" },
];

export function Layout(props: LayoutProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        {/* Without an icon the browser asks for /favicon.ico, which the API answers 401. */}
        <link rel="icon" href="/ui/favicon.svg" type="image/svg+xml" />
        <title>{`${props.title} · openai4s`}</title>
        <style nonce={props.nonce} dangerouslySetInnerHTML={{ __html: STYLES }} />
      </head>
      <body>
        <header>
          <span class="brand">openai4s</span>
          {props.section === "login" ? null : (
            <nav aria-label="Main">
              {LINKS.map((l) => (
                <a href={l.href} aria-current={l.section === props.section ? "page" : undefined}>
                  {l.label}
                </a>
              ))}
            </nav>
          )}
          {props.logoutCsrf === undefined ? null : (
            <form method="post" action="/ui/logout">
              <input type="hidden" name="csrf" value={props.logoutCsrf} />
              <button class="plain" type="submit">
                Log out
              </button>
            </form>
          )}
        </header>
        <main>{props.children}</main>
      </body>
    </html>
  );
}

export function PhaseBadge(props: { readonly phase: string }) {
  return <span class={`badge p-${props.phase}`}>{props.phase}</span>;
}
