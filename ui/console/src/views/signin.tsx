// Sign in with the service token (or any bearer credential the API accepts) or, when an issuer is
// configured, with a maintainer's OIDC login.
import { useState } from "preact/hooks";
import type { Session } from "../api";
import { startSignIn, type OidcConfig } from "../oidc";
import { ErrorBox, TextField } from "../components";

export interface ConsoleConfig {
  apiBase?: string;
  oidc?: OidcConfig;
}

export function SignIn({
  config,
  error,
  onSignedIn,
}: {
  config: ConsoleConfig;
  error: unknown;
  onSignedIn: (session: Session) => void;
}) {
  const [token, setToken] = useState("");
  const [apiBase, setApiBase] = useState(config.apiBase ?? "");
  const [issuer, setIssuer] = useState(config.oidc?.issuer ?? "");
  const [clientId, setClientId] = useState(config.oidc?.clientId ?? "");
  const [oidcError, setOidcError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  return (
    <main class="signin" id="main">
      <h1>citegate console</h1>
      <p class="muted">
        Every action here is an ordinary API call under your credential's policy; the credential is kept in this
        tab's session storage only.
      </p>
      <ErrorBox error={error} label="The API refused the credential" />
      <form
        class="card"
        aria-labelledby="token-title"
        onSubmit={(event) => {
          event.preventDefault();
          if (token.trim()) onSignedIn({ apiBase: apiBase.trim(), token: token.trim(), method: "token" });
        }}
      >
        <h2 id="token-title">Service token</h2>
        <TextField
          id="token"
          label="Bearer token"
          type="password"
          autoComplete="off"
          required
          value={token}
          onValue={setToken}
          aria-describedby="token-help"
        />
        <p id="token-help" class="muted small">
          The service token (RAG_API_TOKEN), an agent token (cgat_…) or an ID token.
        </p>
        <details>
          <summary>API location</summary>
          <TextField
            id="api-base"
            label="API base URL"
            type="url"
            placeholder="same origin as this page"
            value={apiBase}
            onValue={setApiBase}
          />
        </details>
        <button type="submit">Sign in</button>
      </form>
      <form
        class="card"
        aria-labelledby="oidc-title"
        onSubmit={async (event) => {
          event.preventDefault();
          setBusy(true);
          setOidcError(null);
          try {
            await startSignIn({ issuer: issuer.trim(), clientId: clientId.trim(), scope: config.oidc?.scope }, apiBase.trim());
          } catch (failure) {
            setOidcError(failure);
            setBusy(false);
          }
        }}
      >
        <h2 id="oidc-title">Maintainer login (OIDC)</h2>
        {config.oidc ? (
          <p>
            Sign in at <code>{config.oidc.issuer}</code>.
          </p>
        ) : (
          <>
            <TextField id="issuer" label="Issuer URL" type="url" required value={issuer} onValue={setIssuer} />
            <TextField id="client-id" label="Client ID" required value={clientId} onValue={setClientId} />
          </>
        )}
        <ErrorBox error={oidcError} label="OIDC sign-in failed" />
        <button type="submit" disabled={busy}>
          {busy ? "Redirecting…" : "Sign in with OIDC"}
        </button>
      </form>
    </main>
  );
}
