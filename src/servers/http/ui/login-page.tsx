/** @jsxImportSource hono/jsx */
/** The TCP listener's login: a token (the admin's, a principal's, the site's), traded for a cookie. */
import { Layout } from "./layout.tsx";

export function LoginPage(props: { readonly nonce: string; readonly error?: string | undefined }) {
  return (
    <Layout title="Log in" section="login" nonce={props.nonce}>
      <form class="login" method="post" action="/ui/login">
        <h1>Log in</h1>
        <p class="muted">
          Paste your token: the one your admin issued you, a token from your site's sign-in service,
          or the daemon's admin token (<span class="mono">admin-token</span> in its state dir). It
          is checked once and never shown again; the browser keeps only a cookie that expires in 12
          hours (or with the token). You see your own work; the admin sees everyone's.
        </p>
        {props.error ? (
          <p class="error" role="alert">
            {props.error}
          </p>
        ) : null}
        <label for="token">Token</label>
        <input id="token" name="token" type="password" autocomplete="current-password" required />
        <button type="submit">Log in</button>
      </form>
    </Layout>
  );
}
