// What the host page tells the widget: the script tag's data attributes (or window.citegateConfig
// set before the script), and the scope of the page being read (spec 000 section 6.1: the default
// scope follows the page's path and publish state).

export interface Scope {
  projects?: string[];
  paths?: string[];
  version?: string;
  includeWorkingDocs?: boolean;
}

export type TokenSource = () => string | null | undefined | Promise<string | null | undefined>;

export interface Config {
  apiUrl: string; // the only origin the widget ever sends a request to
  project?: string;
  paths?: string[];
  version?: string;
  pathPrefix: string;
  pathDepth: number;
  workingDocs: boolean;
  shortcut: string; // "mod+k" by default; "" turns the shortcut off
  button: boolean;
  sessions: boolean;
  lang?: string;
  token?: TokenSource;
}

type Raw = Record<string, string | undefined>;

function list(value: string | undefined): string[] | undefined {
  const items = (value ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  return items.length ? items : undefined;
}

function flag(value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === "") return fallback;
  return !["false", "0", "off", "no"].includes(value.toLowerCase());
}

function meta(name: string): string | undefined {
  const el = document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`);
  return el?.content?.trim() || undefined;
}

/** The configuration from the script element's data-* attributes, then window.citegateConfig. */
export function readConfig(script: HTMLScriptElement | null, global: Record<string, unknown> = {}): Config {
  const raw: Raw = { ...(script?.dataset ?? {}) };
  for (const [key, value] of Object.entries(global)) {
    if (typeof value === "string" || typeof value === "boolean" || typeof value === "number") raw[key] = String(value);
  }
  // Without data-citegate-url the API is where the script came from (the gateway serves both).
  const fromScript = script?.src ? new URL(script.src, location.href).origin : location.origin;
  const apiUrl = (raw.citegateUrl || fromScript).replace(/\/+$/, "");
  let token: TokenSource | undefined;
  const fn = global.token ?? (raw.tokenFunction ? (window as unknown as Record<string, unknown>)[raw.tokenFunction] : undefined);
  if (typeof fn === "function") token = fn as TokenSource;
  const depth = Number.parseInt(raw.pathDepth ?? "1", 10);
  return {
    apiUrl,
    project: raw.project || undefined,
    paths: list(raw.paths),
    version: raw.version || undefined,
    pathPrefix: (raw.pathPrefix ?? "").replace(/^\/+|\/+$/g, ""),
    pathDepth: Number.isFinite(depth) && depth >= 0 ? depth : 1,
    workingDocs: flag(raw.workingDocs, false),
    shortcut: raw.shortcut ?? "mod+k",
    button: flag(raw.button, true),
    sessions: flag(raw.sessions, true),
    lang: raw.lang || undefined,
    token,
  };
}

/** The page's path under the site's base URL, as documents are keyed: "/docs/intro/" -> "docs/intro". */
export function pagePath(pathname: string, baseUrl = "/"): string {
  let path = decodeURIComponent(pathname);
  const base = baseUrl.endsWith("/") ? baseUrl : baseUrl + "/";
  if (path.startsWith(base)) path = path.slice(base.length);
  return path.replace(/(^|\/)index\.html?$/, "").replace(/\.html?$/, "").replace(/^\/+|\/+$/g, "");
}

/**
 * The scope of a question asked from this page, read when the question is asked (a single-page
 * site such as Docusaurus changes the path without reloading). Explicit attributes win; then the
 * page's <meta name="citegate:*">; then the URL: the first `pathDepth` segments of the path (the
 * page's section), under `pathPrefix`, and Docusaurus's version meta. Working docs only for a
 * signed-in reader on a page that asks for them (the server checks the maintainer claim anyway).
 */
export function pageScope(config: Config, signedIn: boolean, where: Location = location): Scope {
  const scope: Scope = {};
  const project = config.project ?? meta("citegate:project");
  if (project) scope.projects = [project];
  const explicit = config.paths ?? list(meta("citegate:paths"));
  if (explicit) {
    scope.paths = explicit;
  } else {
    const base = meta("citegate:base-url") ?? "/";
    const segments = pagePath(where.pathname, base).split("/").filter(Boolean).slice(0, config.pathDepth);
    const path = [config.pathPrefix, ...segments].filter(Boolean).join("/");
    if (path) scope.paths = [path];
  }
  const version = config.version ?? meta("citegate:version") ?? meta("docsearch:version");
  if (version && version !== "current") scope.version = version;
  scope.includeWorkingDocs = Boolean(config.workingDocs && signedIn);
  return scope;
}

/** "mod+k", "ctrl+shift+a", "/": does this key event match? `mod` is Cmd on Apple, Ctrl elsewhere. */
export function matchesShortcut(shortcut: string, event: KeyboardEvent, apple: boolean): boolean {
  if (!shortcut) return false;
  const parts = shortcut.toLowerCase().split("+").map((p) => p.trim());
  const key = parts.pop();
  const want = { ctrl: false, meta: false, alt: false, shift: false };
  for (const part of parts) {
    if (part === "mod") want[apple ? "meta" : "ctrl"] = true;
    else if (part === "ctrl" || part === "control") want.ctrl = true;
    else if (part === "cmd" || part === "meta") want.meta = true;
    else if (part === "alt" || part === "option") want.alt = true;
    else if (part === "shift") want.shift = true;
  }
  return (
    event.key.toLowerCase() === key &&
    event.ctrlKey === want.ctrl &&
    event.metaKey === want.meta &&
    event.altKey === want.alt &&
    (event.shiftKey === want.shift || key === "/" || key === "?")
  );
}
