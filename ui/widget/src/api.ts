// The Answer API as the widget uses it (docs/api.md, spec 000): every request goes to the
// configured citegate URL and nowhere else; the session token lives in this object only.
import type { Scope, TokenSource } from "./config";

export interface Citation {
  path: string;
  url: string;
  title: string;
  anchor: string;
  chunkId: string;
  sourceProject?: string;
  version?: string;
  snippet?: string;
  page?: number | null;
}

export interface Action {
  type: "create_feedback" | "create_improvement_task";
  enabled: boolean;
  eventType: string;
  dedupeKey: string;
}

export interface AnswerResult {
  answer: string;
  summary: string;
  citations: Citation[];
  confidence: "high" | "medium" | "low";
  noAnswerReason: { code: string; reason: string } | null;
  relatedPages: { path: string; url: string; title: string; version?: string }[];
  actions: Action[];
  audit: { requestId: string; caller: string; scope: string };
  sessionId?: string | null;
  turn?: number | null;
}

export class ApiError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
    readonly retryAfter?: number,
    // Sent without a token: a 401 then means "sign in first" (authenticated-read), not a bad token.
    readonly anonymous = false,
  ) {
    super(message);
  }
}

/** An answer and the scope the request carried (none for a session turn): the server keys the
 * answer's feedback actions on exactly that, so a report must send the same. */
export interface Asked {
  result: AnswerResult;
  sent?: Scope;
}

interface Session {
  id: string;
  token: string;
  scopeKey: string;
}

export class AnswerClient {
  private session: Session | null = null;
  private sessionsAllowed: boolean;

  constructor(
    private readonly apiUrl: string,
    private readonly tokenSource?: TokenSource,
    sessions = true,
  ) {
    this.sessionsAllowed = sessions;
  }

  get sessionId(): string | null {
    return this.session?.id ?? null;
  }

  /** Forget the conversation: the next question starts a new session. */
  reset(): void {
    this.session = null;
  }

  async token(): Promise<string | null> {
    if (!this.tokenSource) return null;
    try {
      return (await this.tokenSource()) || null;
    } catch {
      return null; // a host page whose sign-in failed: ask as an anonymous reader
    }
  }

  private async post<T>(path: string, body: unknown, headers: Record<string, string> = {}): Promise<T> {
    const token = await this.token();
    const all: Record<string, string> = { "content-type": "application/json", ...headers };
    if (token) all.authorization = `Bearer ${token}`;
    let response: Response;
    try {
      response = await fetch(this.apiUrl + path, {
        method: "POST",
        headers: all,
        body: JSON.stringify(body),
        credentials: "omit", // bearer tokens only; never the host page's cookies
        mode: "cors",
      });
    } catch {
      throw new ApiError("network", 0, "network");
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      const retry = Number(response.headers.get("retry-after")) || undefined;
      throw new ApiError(String(data.error ?? "http_" + response.status), response.status, String(data.message ?? ""), retry, !token);
    }
    return data as T;
  }

  /**
   * One question. The first opens an answer session (its first turn is the /answer/ask result);
   * later ones are turns of it, so follow-ups are read in context. A session that expired or is
   * refused, or a page whose scope changed, starts a new one. Hosts without sessions
   * (data-sessions="false", or a policy without answer_sessions) ask /answer/ask each time.
   */
  async ask(question: string, scope: Scope): Promise<Asked> {
    if (!this.sessionsAllowed) return { result: await this.post<AnswerResult>("/answer/ask", { question, scope }), sent: scope };
    const scopeKey = JSON.stringify(scope);
    if (this.session && this.session.scopeKey === scopeKey) {
      try {
        // A turn inherits the session's scope: none is sent, so none keys its feedback either.
        const result = await this.post<AnswerResult>(
          `/answer/sessions/${encodeURIComponent(this.session.id)}/turns`,
          { question },
          { "x-session-token": this.session.token },
        );
        return { result };
      } catch (error) {
        if (!(error instanceof ApiError) || !["session_expired", "session_forbidden"].includes(error.code)) throw error;
        this.session = null;
      }
    }
    try {
      const created = await this.post<{ sessionId: string; sessionToken: string; turns: AnswerResult[] }>(
        "/answer/sessions",
        { question, scope },
      );
      this.session = { id: created.sessionId, token: created.sessionToken, scopeKey };
      return { result: created.turns[created.turns.length - 1], sent: scope };
    } catch (error) {
      // Sessions not granted: 403 to a known caller, 401 to an anonymous one (sign in first).
      if (error instanceof ApiError && (error.code === "forbidden_tool" || (error.code === "unauthorized" && error.anonymous))) {
        this.sessionsAllowed = false;
        return { result: await this.post<AnswerResult>("/answer/ask", { question, scope }), sent: scope };
      }
      throw error;
    }
  }

  /** A report through create_feedback. The idempotency key is the caller's: one per report intent,
   * so a retry or a second click is not counted twice. */
  feedback(report: {
    eventType: string;
    dedupeKey?: string;
    idempotencyKey: string;
    question: string;
    scope?: Scope;
    citations: { path: string; chunkId?: string }[];
    answerRequestId?: string;
    comment?: string;
  }): Promise<{ created: boolean; dedupeKey: string; record: { count: number } }> {
    return this.post("/agent/tools/create_feedback", report);
  }
}
