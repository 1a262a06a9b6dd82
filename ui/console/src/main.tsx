// citegate's operator console: a single page over the HTTP API, routed by the URL's hash.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { Api, clearSession, loadSession, saveSession, type Me, type Session } from "./api";
import { finishSignIn } from "./oidc";
import { SignIn, type ConsoleConfig } from "./views/signin";
import { KnowledgeBases } from "./views/kbs";
import { KnowledgeBaseDetail } from "./views/documents";
import { ChunkViewer } from "./views/chunks";
import { Sources } from "./views/sources";
import { Playground } from "./views/playground";
import { Feedback } from "./views/feedback";
import { Insights } from "./views/insights";
import { Audit } from "./views/audit";
import { Policies } from "./views/policies";
import { Credentials } from "./views/credentials";

const SCREENS = [
  { hash: "#/kbs", label: "Knowledge bases" },
  { hash: "#/playground", label: "Playground" },
  { hash: "#/feedback", label: "Feedback" },
  { hash: "#/insights", label: "Insights" },
  { hash: "#/audit", label: "Audit log" },
  { hash: "#/policies", label: "Policies" },
  { hash: "#/credentials", label: "Agent credentials" },
];

function useHash(): string {
  const [hash, setHash] = useState(location.hash || "#/kbs");
  useEffect(() => {
    const onChange = () => setHash(location.hash || "#/kbs");
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return hash;
}

function Screen({ hash, api }: { hash: string; api: Api }) {
  const [route, query = ""] = hash.replace(/^#\/?/, "").split("?");
  const parts = route.split("/").map(decodeURIComponent);
  switch (parts[0]) {
    case "kb":
      if (parts[2] === "doc" && parts[3]) return <ChunkViewer api={api} kbId={parts[1]} documentId={parts[3]} />;
      if (parts[2] === "sources") return <Sources api={api} kbId={parts[1]} />;
      return <KnowledgeBaseDetail api={api} kbId={parts[1]} />;
    case "playground":
      return <Playground api={api} initialKb={new URLSearchParams(query).get("kb") ?? ""} />;
    case "feedback":
      return <Feedback api={api} />;
    case "insights":
      return <Insights api={api} />;
    case "audit":
      return <Audit api={api} />;
    case "policies":
      return <Policies api={api} />;
    case "credentials":
      return <Credentials api={api} />;
    default:
      return <KnowledgeBases api={api} />;
  }
}

function Shell({
  session,
  me,
  onSignOut,
}: {
  session: Session;
  me: Me;
  onSignOut: (error?: unknown) => void;
}) {
  const hash = useHash();
  const api = useRef(new Api(session, (error) => onSignOut(error))).current;
  const main = useRef<HTMLElement>(null);
  const first = useRef(true);
  // Moving between screens moves focus to the new screen, so keyboard and screen-reader users
  // land on what changed instead of staying on the link they left.
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    main.current?.focus();
  }, [hash]);
  const section = "#/" + (hash.replace(/^#\/?/, "").split(/[/?]/)[0] || "kbs");
  const active = section === "#/kb" ? "#/kbs" : section;
  return (
    <div class="shell">
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), main.current?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">citegate console</span>
        <nav aria-label="Console sections">
          <ul>
            {SCREENS.map((screen) => (
              <li key={screen.hash}>
                <a href={screen.hash} aria-current={active === screen.hash ? "page" : undefined}>
                  {screen.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span title={`tenant ${me.principal.tenant_id}`}>
            Signed in as <strong>{me.principal.type}:{me.principal.id}</strong>
          </span>
          <button type="button" class="secondary" onClick={() => onSignOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" ref={main} tabIndex={-1}>
        <Screen hash={hash} api={api} />
      </main>
    </div>
  );
}

function App() {
  const [config, setConfig] = useState<ConsoleConfig | null>(null);
  const [session, setSession] = useState<Session | null>(loadSession());
  const [me, setMe] = useState<Me | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [callback, setCallback] = useState(true);

  useEffect(() => {
    // Optional deployment settings beside index.html (API URL, OIDC issuer and client id).
    fetch("config.json", { credentials: "omit" })
      .then((r) => (r.ok ? r.json() : {}))
      .catch(() => ({}))
      .then((value) => setConfig(value as ConsoleConfig));
    finishSignIn()
      .then((result) => {
        if (result) {
          const next: Session = { apiBase: result.apiBase, token: result.token, method: "oidc" };
          saveSession(next);
          setSession(next);
        }
      })
      .catch(setError)
      .finally(() => setCallback(false));
  }, []);

  useEffect(() => {
    if (!session) return;
    // Who am I, under my own policy: a credential the API refuses never opens the console.
    new Api(session)
      .get<Me>("/v1/me")
      .then((value) => {
        setMe(value);
        setError(null);
      })
      .catch((failure) => {
        clearSession();
        setSession(null);
        setMe(null);
        setError(failure);
      });
  }, [session]);

  if (callback || config === null) return <p class="boot">Loading the citegate console…</p>;
  if (!session || !me) {
    if (session && !error) return <p class="boot">Signing in…</p>;
    return (
      <SignIn
        config={config}
        error={error}
        onSignedIn={(next) => {
          saveSession(next);
          setError(null);
          setSession(next);
        }}
      />
    );
  }
  return (
    <Shell
      session={session}
      me={me}
      onSignOut={(error) => {
        clearSession();
        setMe(null);
        setSession(null);
        setError(error ?? null);  // signed out by a 401: the sign-in page says why
        if (!error) location.hash = "";
      }}
    />
  );
}

export function mount(): void {
  const root = document.getElementById("app");
  if (root) {
    root.textContent = "";
    render(<App />, root);
  }
}

mount();
