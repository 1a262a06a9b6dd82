// The widget's interface: a launcher, then a modal dialog holding the conversation.
// Keyboard first: the shortcut opens it, focus moves in and stays in (Tab wraps), Esc closes it
// and focus goes back to where it was.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { AnswerClient, AnswerResult, Citation } from "./api";
import { ApiError } from "./api";
import { type Config, type Scope, matchesShortcut, pageScope } from "./config";
import type { Strings } from "./i18n";
import { Markdown, safeHref } from "./markdown";

interface Turn {
  id: number;
  question: string;
  scope?: Scope; // as the request carried it
  result?: AnswerResult;
  error?: string;
}

type SendState = "sending" | "sent" | "failed";

interface Props {
  config: Config;
  client: AnswerClient;
  strings: Strings;
  lang: "en" | "zh";
  shadow: ShadowRoot;
  controls: { open?: (q?: string) => void; close?: () => void };
}

const APPLE = /Mac|iPhone|iPad|iPod/.test(navigator.platform || navigator.userAgent);

function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function shortcutLabel(shortcut: string): string {
  return shortcut
    .split("+")
    .map((p) => (p === "mod" ? (APPLE ? "⌘" : "Ctrl") : p.length === 1 ? p.toUpperCase() : p[0].toUpperCase() + p.slice(1)))
    .join(APPLE ? "" : "+");
}

/** The shortcut as aria-keyshortcuts spells it: "mod+k" -> "Control+K" (or "Meta+K" on Apple). */
function ariaShortcut(shortcut: string): string {
  const names: Record<string, string> = { mod: APPLE ? "Meta" : "Control", ctrl: "Control", cmd: "Meta", option: "Alt" };
  return shortcut
    .split("+")
    .map((p) => names[p] ?? (p.length === 1 ? p.toUpperCase() : p[0].toUpperCase() + p.slice(1)))
    .join("+");
}

/** url#anchor, resolved against the page (citations carry site-relative URLs); null if not http(s). */
export function citationHref(c: Citation): string | null {
  if (!c.url) return null;
  const href = safeHref(c.url);
  if (!href) return null;
  const url = new URL(href);
  if (c.anchor) url.hash = c.anchor;
  return url.href;
}

function errorText(strings: Strings, error: unknown): string {
  if (!(error instanceof ApiError)) return strings.errors.network;
  const e = strings.errors;
  if (error.code === "network") return e.network;
  if (error.code === "rate_limited") return e.rate_limited(error.retryAfter);
  if (error.code === "unauthorized") return error.anonymous ? e.sign_in : e.unauthorized;
  if (error.code === "forbidden_scope") return e.forbidden_scope;
  if (error.code === "dataset_not_allowed") return e.dataset_not_allowed;
  if (error.status >= 500) return e.unavailable;
  return e.other(error.code);
}

export function App({ config, client, strings, lang, shadow, controls }: Props) {
  const [open, setOpen] = useState(false);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [sends, setSends] = useState<Record<string, SendState>>({});
  const inFlight = useRef(new Set<string>()); // synchronous guard: a double click sends once
  const keys = useRef(new Map<string, string>()); // one idempotency key per report
  const returnTo = useRef<HTMLElement | null>(null);
  const dialog = useRef<HTMLDivElement>(null);
  const input = useRef<HTMLInputElement>(null);
  const launcher = useRef<HTMLButtonElement>(null);
  const log = useRef<HTMLDivElement>(null);
  const nextId = useRef(1);

  const show = (question?: string) => {
    if (!open) {
      const active = (shadow.activeElement ?? document.activeElement) as HTMLElement | null;
      returnTo.current = active && active !== document.body ? active : null;
    }
    if (question !== undefined) setText(question);
    setOpen(true);
  };
  const hide = () => {
    setOpen(false);
    // Now, not after the re-render: the launcher and the page stay while the dialog goes.
    const target = returnTo.current?.isConnected ? returnTo.current : launcher.current;
    target?.focus();
  };
  controls.open = show;
  controls.close = hide;

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (matchesShortcut(config.shortcut, event, APPLE)) {
        event.preventDefault();
        if (open) hide();
        else show();
      }
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  });

  // Before the next paint: a key typed right after opening lands in the question field.
  useLayoutEffect(() => {
    if (open) input.current?.focus();
  }, [open]);

  useEffect(() => {
    const el = log.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [turns, busy]);

  const onDialogKey = (event: KeyboardEvent) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      hide();
      return;
    }
    if (event.key !== "Tab" || !dialog.current) return;
    const focusable = Array.from(
      dialog.current.querySelectorAll<HTMLElement>('a[href], button:not([disabled]), input:not([disabled]), [tabindex="0"]'),
    );
    if (!focusable.length) return;
    const first = focusable[0];
    const last = focusable[focusable.length - 1];
    const active = shadow.activeElement;
    if (event.shiftKey && (active === first || !dialog.current.contains(active))) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && (active === last || !dialog.current.contains(active))) {
      event.preventDefault();
      first.focus();
    }
  };

  const ask = async (event: Event) => {
    event.preventDefault();
    const question = text.trim();
    if (!question || busy) return;
    const signedIn = Boolean(await client.token());
    const scope = pageScope(config, signedIn);
    const id = nextId.current++;
    setTurns((t) => [...t, { id, question }]);
    setText("");
    setBusy(true);
    try {
      const { result, sent } = await client.ask(question, scope);
      setTurns((t) => t.map((turn) => (turn.id === id ? { ...turn, result, scope: sent } : turn)));
    } catch (error) {
      setTurns((t) => t.map((turn) => (turn.id === id ? { ...turn, error: errorText(strings, error) } : turn)));
    } finally {
      setBusy(false);
      input.current?.focus();
    }
  };

  const report = async (turn: Turn, kind: "gap" | "helpful" | "not_helpful") => {
    const result = turn.result;
    if (!result) return;
    const key = `${turn.id}:${kind === "gap" ? "gap" : "rating"}`;
    if (inFlight.current.has(key) || sends[key] === "sending" || sends[key] === "sent") return;
    inFlight.current.add(key);
    if (!keys.current.has(key + kind)) keys.current.set(key + kind, randomKey());
    setSends((s) => ({ ...s, [key]: "sending" }));
    const action = result.actions.find((a) => a.type === "create_feedback");
    const citations = result.citations.map((c) => ({ path: c.path, chunkId: c.chunkId })).filter((c) => c.path);
    // A no-answer and a "not helpful" are the answer's own feedback action (its event type and
    // dedupeKey, so every reader's report of the same gap lands on one record); "helpful" is a
    // signal of its own kind, kept apart from the problems maintainers work through.
    const useAction = kind !== "helpful" && action;
    try {
      await client.feedback({
        eventType: useAction ? action.eventType : "qa_helpful",
        dedupeKey: useAction ? action.dedupeKey : undefined,
        idempotencyKey: keys.current.get(key + kind) as string,
        question: turn.question,
        scope: turn.scope,
        citations,
        answerRequestId: result.audit?.requestId,
        comment: kind === "gap" ? undefined : kind === "helpful" ? "helpful" : "not helpful",
      });
      setSends((s) => ({ ...s, [key]: "sent", [key + ":choice"]: kind as SendState }));
    } catch {
      setSends((s) => ({ ...s, [key]: "failed" }));
    } finally {
      inFlight.current.delete(key);
    }
  };

  const newConversation = () => {
    client.reset();
    setTurns([]);
    input.current?.focus();
  };

  const hint = config.shortcut ? shortcutLabel(config.shortcut) : "";
  return (
    <div class="root" lang={lang}>
      {config.button && (
        <button
          ref={launcher}
          type="button"
          class="launcher"
          aria-haspopup="dialog"
          aria-expanded={open}
          aria-keyshortcuts={config.shortcut ? ariaShortcut(config.shortcut) : undefined}
          onClick={() => (open ? hide() : show())}
        >
          <span>{strings.launcher}</span>
          {hint && <kbd>{hint}</kbd>}
        </button>
      )}
      {open && (
        <div class="backdrop" onMouseDown={(e) => e.target === e.currentTarget && hide()}>
          <div
            ref={dialog}
            class="dialog"
            role="dialog"
            aria-modal="true"
            aria-labelledby="cg-title"
            aria-describedby="cg-intro"
            onKeyDown={onDialogKey}
          >
            <header>
              <h2 id="cg-title">{strings.title}</h2>
              {turns.length > 0 && (
                <button type="button" class="ghost" onClick={newConversation}>
                  {strings.newConversation}
                </button>
              )}
              <button type="button" class="ghost" onClick={hide} aria-label={strings.close}>
                <span aria-hidden="true">✕</span>
              </button>
            </header>
            <div ref={log} class="log" role="log" aria-live="polite" aria-busy={busy} aria-label={strings.title}>
              <p id="cg-intro" class="intro">
                {strings.intro}
              </p>
              {turns.map((turn) => (
                <TurnView key={turn.id} turn={turn} strings={strings} sends={sends} report={report} />
              ))}
              {busy && (
                <p class="pending" role="status">
                  {strings.working}
                </p>
              )}
            </div>
            <form onSubmit={ask}>
              <label class="field">
                <span class="who">{strings.inputLabel}</span>
                <input
                  ref={input}
                  type="text"
                  name="question"
                  autoComplete="off"
                  maxLength={4000}
                  placeholder={strings.placeholder}
                  value={text}
                  onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)}
                />
              </label>
              <button type="submit" class="primary" disabled={busy}>
                {strings.send}
              </button>
            </form>
            {turns.some((t) => t.result) && config.sessions && <p class="foot">{strings.followUp}</p>}
          </div>
        </div>
      )}
    </div>
  );
}

function TurnView({
  turn,
  strings,
  sends,
  report,
}: {
  turn: Turn;
  strings: Strings;
  sends: Record<string, SendState | string>;
  report: (turn: Turn, kind: "gap" | "helpful" | "not_helpful") => void;
}) {
  const result = turn.result;
  const cite = (n: number, key: string) => {
    const c = result?.citations[n - 1];
    if (!c) return null;
    const href = citationHref(c);
    const label = strings.source(n, c.title || c.path);
    return href ? (
      <a key={key} class="cite" href={href} aria-label={label}>
        [{n}]
      </a>
    ) : (
      <sup key={key}>[{n}]</sup>
    );
  };
  const gap = sends[`${turn.id}:gap`];
  const rating = sends[`${turn.id}:rating`];
  const choice = sends[`${turn.id}:rating:choice`];
  const noAnswer = result?.noAnswerReason;
  const action = result?.actions.find((a) => a.type === "create_feedback");
  return (
    <article class="turn" aria-label={turn.question}>
      <p class="q">
        <span class="who">{strings.you}: </span>
        {turn.question}
      </p>
      {turn.error && (
        <p class="error" role="alert">
          {turn.error}
        </p>
      )}
      {result && noAnswer && (
        <div class="noanswer">
          <h3 class="sub">{strings.noAnswer}</h3>
          <p>{noAnswer.reason}</p>
          {result.answer && <Markdown source={result.answer} cite={cite} />}
          {action?.enabled && (
            <div class="actions">
              <button
                type="button"
                class="ghost"
                aria-disabled={gap === "sending" || gap === "sent"}
                onClick={() => report(turn, "gap")}
              >
                {gap === "sending" ? strings.reporting : strings.report}
              </button>
              <span class="status" role="status">
                {gap === "sent" ? strings.reported : gap === "failed" ? strings.reportFailed : ""}
              </span>
            </div>
          )}
          {result.relatedPages.length > 0 && (
            <>
              <h3 class="sub">{strings.related}</h3>
              <ul class="sources">
                {result.relatedPages.map((p) => {
                  const href = p.url ? safeHref(p.url) : null;
                  return <li key={p.path}>{href ? <a href={href}>{p.title || p.path}</a> : p.title || p.path}</li>;
                })}
              </ul>
            </>
          )}
        </div>
      )}
      {result && !noAnswer && (
        <>
          <span class="who">{strings.answer}: </span>
          <Markdown source={result.answer} cite={cite} />
          <p class="confidence">
            <strong>{strings.confidence[result.confidence]}</strong>
          </p>
          {result.citations.length > 0 && (
            <>
              <h3 class="sub">{strings.sources}</h3>
              <ol class="sources">
                {result.citations.map((c, i) => {
                  const href = citationHref(c);
                  const title = c.title || c.path;
                  return (
                    <li key={c.chunkId || i}>
                      {href ? <a href={href}>{title}</a> : title}
                      <span class="meta">
                        {c.path}
                        {c.version ? ` · ${strings.version} ${c.version}` : ""}
                        {c.page ? ` · ${strings.page} ${c.page}` : ""}
                      </span>
                    </li>
                  );
                })}
              </ol>
            </>
          )}
        </>
      )}
      {result && (!noAnswer || !action?.enabled) && (
        <div class="actions" role="group" aria-label={strings.helpfulQuestion}>
          <span aria-hidden="true">{strings.helpfulQuestion}</span>
          <button
            type="button"
            class="ghost"
            aria-pressed={choice === "helpful"}
            aria-disabled={rating === "sending" || rating === "sent"}
            onClick={() => report(turn, "helpful")}
          >
            {strings.helpful}
          </button>
          <button
            type="button"
            class="ghost"
            aria-pressed={choice === "not_helpful"}
            aria-disabled={rating === "sending" || rating === "sent"}
            onClick={() => report(turn, "not_helpful")}
          >
            {strings.notHelpful}
          </button>
          <span class="status" role="status">
            {rating === "sent" ? strings.thanks : rating === "failed" ? strings.reportFailed : ""}
          </span>
        </div>
      )}
    </article>
  );
}
