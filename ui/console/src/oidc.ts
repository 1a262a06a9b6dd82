// A maintainer's OIDC sign-in: authorization code with PKCE (RFC 7636, S256), a public client, no
// secret in the page. The ID token it returns is what the API verifies (CITEGATE_OIDC_ISSUER and
// CITEGATE_OIDC_AUDIENCE, the audience being this client's id); it is kept in sessionStorage only.

export interface OidcConfig {
  issuer: string;
  clientId: string;
  scope?: string;
}

interface Pending {
  state: string;
  verifier: string;
  nonce: string;
  issuer: string;
  clientId: string;
  tokenEndpoint: string;
  redirectUri: string;
  apiBase: string;
}

const PENDING = "citegate.console.oidc";

function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function challengeOf(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

async function discover(issuer: string): Promise<{ authorization_endpoint: string; token_endpoint: string }> {
  const url = issuer.replace(/\/+$/, "") + "/.well-known/openid-configuration";
  const response = await fetch(url, { credentials: "omit" });
  if (!response.ok) throw new Error(`the issuer's discovery document answered HTTP ${response.status}`);
  const doc = (await response.json()) as Record<string, unknown>;
  if (typeof doc.authorization_endpoint !== "string" || typeof doc.token_endpoint !== "string") {
    throw new Error("the issuer's discovery document has no authorization or token endpoint");
  }
  return { authorization_endpoint: doc.authorization_endpoint, token_endpoint: doc.token_endpoint };
}

export function redirectUri(): string {
  return location.origin + location.pathname;
}

/** Leave for the issuer's login page; `finishSignIn` completes it when the browser comes back. */
export async function startSignIn(config: OidcConfig, apiBase: string): Promise<void> {
  const endpoints = await discover(config.issuer);
  const pending: Pending = {
    state: randomString(),
    verifier: randomString(),
    nonce: randomString(),
    issuer: config.issuer,
    clientId: config.clientId,
    tokenEndpoint: endpoints.token_endpoint,
    redirectUri: redirectUri(),
    apiBase,
  };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const url = new URL(endpoints.authorization_endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", config.clientId);
  url.searchParams.set("redirect_uri", pending.redirectUri);
  url.searchParams.set("scope", config.scope || "openid profile email");
  url.searchParams.set("state", pending.state);
  url.searchParams.set("nonce", pending.nonce);
  url.searchParams.set("code_challenge", await challengeOf(pending.verifier));
  url.searchParams.set("code_challenge_method", "S256");
  location.assign(url.toString());
}

function claimsOf(jwt: string): Record<string, unknown> {
  const part = jwt.split(".")[1] ?? "";
  const bytes = Uint8Array.from(atob(part.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
}

/** On the way back from the issuer (?code=&state=): exchange the code for the ID token. Returns
 * null when this page load is not a sign-in callback. The API verifies the token's signature; the
 * page checks state and nonce so a forged callback cannot plant someone else's login. */
export async function finishSignIn(): Promise<{ token: string; apiBase: string } | null> {
  const params = new URLSearchParams(location.search);
  const code = params.get("code");
  const failure = params.get("error");
  if (!code && !failure) return null;
  const raw = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, "", location.pathname + location.hash);
  if (failure) throw new Error(`the issuer refused the sign-in: ${failure} ${params.get("error_description") ?? ""}`.trim());
  if (!raw) throw new Error("this sign-in was not started from this tab; start again");
  const pending = JSON.parse(raw) as Pending;
  if (params.get("state") !== pending.state) throw new Error("the sign-in state does not match; start again");
  const response = await fetch(pending.tokenEndpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    credentials: "omit",
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: code ?? "",
      redirect_uri: pending.redirectUri,
      client_id: pending.clientId,
      code_verifier: pending.verifier,
    }),
  });
  if (!response.ok) throw new Error(`the issuer's token endpoint answered HTTP ${response.status}`);
  const tokens = (await response.json()) as Record<string, unknown>;
  const idToken = tokens.id_token;
  if (typeof idToken !== "string") throw new Error("the issuer returned no ID token");
  if (claimsOf(idToken).nonce !== pending.nonce) throw new Error("the ID token's nonce does not match; start again");
  return { token: idToken, apiBase: pending.apiBase };
}
