import { afterEach, describe, expect, test } from "bun:test";
import { getWorkload } from "../../src/adapters/store-sqlite/index.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness } from "../support/api-harness.ts";

const TOKEN = "s3cret-admin-token-0123456789abcdef";
const TCP: Access = { kind: "Bearer", token: TOKEN };
const open: Harness[] = [];
function make(): Harness {
  const h = harness();
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const PAGES = ["/ui/workloads", "/ui/cluster", "/ui/sessions"];

async function submit(h: Harness): Promise<string> {
  const res = await h.post("/v1/workloads", {
    kind: "BATCH",
    name: "hello",
    profile: "default",
    command: ["echo", "hi"],
  });
  return ((await res.json()) as { id: string }).id;
}

function form(fields: Record<string, string>, headers: Record<string, string> = {}): RequestInit {
  return {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields).toString(),
  };
}

async function login(h: Harness, token = TOKEN): Promise<Response> {
  return await h.request("/ui/login", form({ token }), TCP);
}

function cookieOf(res: Response): string {
  const set = res.headers.get("set-cookie") ?? "";
  return set.split(";")[0] ?? "";
}

function csrfOf(html: string): string {
  const match = /name="csrf" value="([^"]+)"/.exec(html);
  if (!match?.[1]) throw new Error("no csrf field in the page");
  return match[1];
}

describe("/ui over TCP", () => {
  test("no page without a login: every page redirects to the form and shows nothing", async () => {
    const h = make();
    const id = await submit(h);
    for (const path of [...PAGES, `/ui/workloads/${id}`, `/ui/workloads/${id}/log`]) {
      const res = await h.request(path, {}, TCP);
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toBe("/ui/login");
      expect(await res.text()).not.toContain(id);
    }
    // A bearer header is the API's way, not the pages' (and a forged cookie is nothing).
    const forged = await h.request(
      "/ui/workloads",
      { headers: { cookie: `openai4s_ui=99999999999999.${"A".repeat(43)}` } },
      TCP,
    );
    expect(forged.status).toBe(303);
  });

  test("a wrong token is refused; the right one gives an HttpOnly SameSite=Strict cookie, not the token", async () => {
    const h = make();
    const wrong = await login(h, "nope");
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();
    const ok = await login(h);
    expect(ok.status).toBe(303);
    const set = ok.headers.get("set-cookie") ?? "";
    expect(set).toContain("HttpOnly");
    expect(set).toContain("SameSite=Strict");
    expect(set).toContain("Path=/ui");
    expect(set).not.toContain("Secure");
    expect(set).not.toContain(TOKEN);
    const page = await h.request("/ui/workloads", { headers: { cookie: cookieOf(ok) } }, TCP);
    expect(page.status).toBe(200);
    expect(await page.text()).not.toContain(TOKEN);
    // The cookie opens the pages only: the JSON API still wants the bearer token.
    const api = await h.request("/v1/workloads", { headers: { cookie: cookieOf(ok) } }, TCP);
    expect(api.status).toBe(401);
  });

  test("a form body far larger than a login is refused before it is read as a form", async () => {
    const h = make();
    const res = await h.request("/ui/login", form({ token: TOKEN, pad: "x".repeat(20_000) }), TCP);
    expect(res.status).toBe(413);
    expect(res.headers.get("set-cookie")).toBeNull();
  });

  test("under TLS the cookie is Secure", async () => {
    const h = make();
    const res = await h.app.request("https://localhost/ui/login", form({ token: TOKEN }), {
      access: TCP,
    });
    expect(res.headers.get("set-cookie")).toContain("Secure");
  });

  test("cancel is refused without the CSRF token, from another origin, and done with it", async () => {
    const h = make();
    const id = await submit(h);
    const cookie = cookieOf(await login(h));
    const page = await h.request(`/ui/workloads/${id}`, { headers: { cookie } }, TCP);
    const csrf = csrfOf(await page.text());
    const cancel = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
      h.request(`/ui/workloads/${id}/cancel`, form(fields, { cookie, ...headers }), TCP);
    expect((await cancel({})).status).toBe(403);
    expect((await cancel({ csrf: `${csrf}x` })).status).toBe(403);
    expect((await cancel({ csrf }, { origin: "https://evil.example" })).status).toBe(403);
    // An opaque origin (a sandboxed frame, a data: page) is not ours either.
    expect((await cancel({ csrf }, { origin: "null" })).status).toBe(403);
    expect(getWorkload(h.store, id)?.desired.kind).toBe("RUN");
    const wakes = h.wakes.count;
    const done = await cancel({ csrf });
    expect(done.status).toBe(303);
    // The stop is recorded and the reconciler woken to carry it out (as POST /cancel does).
    expect(getWorkload(h.store, id)?.desired).toMatchObject({
      kind: "STOP",
      reason: "USER_CANCELLED",
    });
    expect(h.wakes.count).toBe(wakes + 1);
  });

  test("every page carries a strict Content-Security-Policy with a fresh nonce", async () => {
    const h = make();
    const id = await submit(h);
    const cookie = cookieOf(await login(h));
    const nonces = new Set<string>();
    for (const path of [...PAGES, `/ui/workloads/${id}`, "/ui/login"]) {
      const res = await h.request(path, { headers: { cookie } }, TCP);
      expect(res.status).toBe(200);
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("default-src 'none'");
      expect(csp).not.toContain("unsafe-inline");
      const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1] ?? "";
      expect(nonce.length).toBeGreaterThan(16);
      nonces.add(nonce);
      const html = await res.text();
      // Every inline script and style carries this response's nonce, no other.
      for (const tag of html.match(/<(script|style)[^>]*>/g) ?? []) {
        expect(tag).toContain(`nonce="${nonce}"`);
      }
      expect(res.headers.get("x-frame-options")).toBe("DENY");
    }
    expect(nonces.size).toBe(5);
  });
});

describe("/ui on the unix socket", () => {
  test("pages open without a login, but cancel still wants the CSRF token", async () => {
    const h = make();
    const id = await submit(h);
    for (const path of PAGES) expect((await h.request(path)).status).toBe(200);
    const html = await (await h.request(`/ui/workloads/${id}`)).text();
    expect(html).toContain(id);
    expect((await h.request(`/ui/workloads/${id}/cancel`, form({}))).status).toBe(403);
    const ok = await h.request(`/ui/workloads/${id}/cancel`, form({ csrf: csrfOf(html) }));
    expect(ok.status).toBe(303);
    expect(getWorkload(h.store, id)?.desired.kind).toBe("STOP");
  });

  test("a filter value that is not a phase is named in a 400, not silently dropped", async () => {
    const h = make();
    const res = await h.request("/ui/workloads?phase=RUNNIN");
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("phase");
  });
});

describe("/ui for principals (issue 32)", () => {
  /** A principal with a token, and a workload it submitted over TCP. */
  async function principalWithWork(h: Harness, name: string) {
    expect((await h.post("/v1/principals", { name })).status).toBe(201);
    const minted = await h.post(`/v1/principals/${name}/tokens`, {});
    expect(minted.status).toBe(201);
    const token = ((await minted.json()) as { token: string }).token;
    const created = await h.request(
      "/v1/workloads",
      {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
        body: JSON.stringify({
          kind: "BATCH",
          name: `${name}-job`,
          profile: "default",
          command: ["true"],
        }),
      },
      TCP,
    );
    expect(created.status).toBe(201);
    const id = ((await created.json()) as { id: string }).id;
    return { token, id };
  }

  test("a principal signs in with its token and sees, reads and cancels its own work only", async () => {
    const h = make();
    const alice = await principalWithWork(h, "alice");
    const bob = await principalWithWork(h, "bob");
    const admins = await submit(h);
    const signedIn = await login(h, alice.token);
    expect(signedIn.status).toBe(303);
    const cookie = cookieOf(signedIn);
    const get = (path: string) => h.request(path, { headers: { cookie } }, TCP);
    const list = await (await get("/ui/workloads")).text();
    expect(list).toContain(alice.id);
    expect(list).not.toContain(bob.id);
    expect(list).not.toContain(admins);
    // Asking for another owner's list still shows only hers.
    const asked = await (await get("/ui/workloads?owner=bob")).text();
    expect(asked).not.toContain(bob.id);
    expect(asked).toContain(alice.id);
    const own = await get(`/ui/workloads/${alice.id}`);
    expect(own.status).toBe(200);
    const csrf = csrfOf(await own.text());
    // Another's workload, its log and its cancel answer as a missing one.
    for (const foreign of [bob.id, admins]) {
      const missing = await get(`/ui/workloads/${foreign}`);
      expect(missing.status).toBe(404);
      expect(await missing.text()).toBe(`no workload ${JSON.stringify(foreign)}`);
      expect((await get(`/ui/workloads/${foreign}/log`)).status).toBe(404);
      const cancel = await h.request(
        `/ui/workloads/${foreign}/cancel`,
        form({ csrf }, { cookie }),
        TCP,
      );
      expect(cancel.status).toBe(404);
      expect(getWorkload(h.store, foreign)?.desired.kind).toBe("RUN");
    }
    expect((await get("/ui/cluster")).status).toBe(403);
    const mine = await h.request(
      `/ui/workloads/${alice.id}/cancel`,
      form({ csrf }, { cookie }),
      TCP,
    );
    expect(mine.status).toBe(303);
    expect(getWorkload(h.store, alice.id)?.desired.kind).toBe("STOP");
    // The admin's login still sees everyone's.
    const adminCookie = cookieOf(await login(h));
    const all = await (
      await h.request("/ui/workloads", { headers: { cookie: adminCookie } }, TCP)
    ).text();
    for (const id of [alice.id, bob.id, admins]) expect(all).toContain(id);
  });

  test("a revoked token or a removed principal ends its page login at once", async () => {
    const h = make();
    const alice = await principalWithWork(h, "alice");
    const cookie = cookieOf(await login(h, alice.token));
    const get = () => h.request("/ui/workloads", { headers: { cookie } }, TCP);
    expect((await get()).status).toBe(200);
    const tokenId = alice.token.split("_")[1];
    expect((await h.post(`/v1/tokens/${tokenId}/revoke`, {})).status).toBe(200);
    const after = await get();
    expect(after.status).toBe(303);
    expect(after.headers.get("location")).toBe("/ui/login");
  });

  test("a wrong principal token is refused with no cookie", async () => {
    const h = make();
    const alice = await principalWithWork(h, "alice");
    const wrong = await login(h, `${alice.token.slice(0, -4)}AAAA`);
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();
  });
});
