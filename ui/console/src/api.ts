// The console is an ordinary client of the HTTP API: every call carries the operator's bearer
// credential and goes through the same admission and policy as curl would. Nothing here is privileged.

export interface Session {
  apiBase: string; // "" means the origin that serves the console
  token: string;
  method: "token" | "oidc";
}

const KEY = "citegate.console.session";

// sessionStorage only: the credential dies with the tab and is never written to disk by us.
export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as Session;
    return parsed && typeof parsed.token === "string" && parsed.token ? parsed : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session): void {
  sessionStorage.setItem(KEY, JSON.stringify(session));
}

export function clearSession(): void {
  sessionStorage.removeItem(KEY);
}

/** An error answered by the API ({error, message, requestId, details}) or by the network. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId?: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export function describe(error: unknown): { code: string; message: string; status?: number; requestId?: string } {
  if (error instanceof ApiError) {
    return { code: error.code, message: error.message, status: error.status, requestId: error.requestId };
  }
  return { code: "client_error", message: error instanceof Error ? error.message : String(error) };
}

function join(base: string, path: string): string {
  return base ? base.replace(/\/+$/, "") + path : path;
}

async function errorOf(response: Response): Promise<ApiError> {
  const text = await response.text();
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    // The /v1 and /answer families use {error, message}; spec 001's routes may nest it.
    const nested = typeof body.error === "object" && body.error ? (body.error as Record<string, unknown>) : null;
    const code = String(nested?.code ?? body.error ?? body.code ?? `http_${response.status}`);
    const message = String(nested?.message ?? body.message ?? response.statusText);
    const requestId = String(body.requestId ?? response.headers.get("apigw-requestid") ?? "") || undefined;
    return new ApiError(response.status, code, message, requestId, body.details);
  } catch {
    return new ApiError(response.status, `http_${response.status}`, text.slice(0, 200) || response.statusText);
  }
}

export class Api {
  /** `onUnauthorized`: the API no longer accepts the credential (an ID token expired, a token was
   * rotated or revoked); the console then signs out instead of failing screen after screen. */
  constructor(
    readonly session: Session,
    private readonly onUnauthorized?: (error: ApiError) => void,
  ) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await this.send(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (await response.json()) as T;
  }

  /** A text answer (an export): the same credential and errors as `call`. */
  async text(path: string, accept: string): Promise<string> {
    return (await this.send(path, { headers: { Accept: accept } })).text();
  }

  /** One request with the credential; a failure is an ApiError (a 401 also signs out). */
  private async send(path: string, init: RequestInit & { headers: Record<string, string> }): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(join(this.session.apiBase, path), {
        ...init,
        headers: { Authorization: `Bearer ${this.session.token}`, ...init.headers },
        credentials: "omit",
      });
    } catch (error) {
      throw new ApiError(0, "network_error", `the API could not be reached (${describe(error).message})`);
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401) this.onUnauthorized?.(error);
      throw error;
    }
    return response;
  }

  get<T>(path: string): Promise<T> {
    return this.call<T>("GET", path);
  }
  post<T>(path: string, body: unknown = {}): Promise<T> {
    return this.call<T>("POST", path, body);
  }
  put<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>("PUT", path, body);
  }
  patch<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>("PATCH", path, body);
  }
  delete<T>(path: string): Promise<T> {
    return this.call<T>("DELETE", path);
  }
}

/** PUT a file to a presigned URL with upload progress (fetch cannot report upload progress). */
export function putWithProgress(
  url: string,
  headers: Record<string, string>,
  file: Blob,
  onProgress: (fraction: number) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", url);
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1);
        resolve();
      } else {
        reject(new ApiError(xhr.status, "upload_failed", `the storage refused the upload (HTTP ${xhr.status})`));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, "upload_failed", "the upload URL could not be reached"));
    xhr.send(file);
  });
}

export const enc = encodeURIComponent;

// Shapes of the answers the console reads (docs/api.md).
export interface KnowledgeBase {
  kb_id: string;
  name: string;
  description: string;
  status: "working" | "approved";
  document_count: number;
  created_at: string;
  updated_at: string;
}

export interface DocumentRecord {
  document_id: string;
  source_name: string;
  title: string;
  status: string;
  task_id: string;
  counts?: { parents?: number; children?: number };
  size_bytes?: number;
  updated_at?: string;
}

export interface Task {
  task_id: string;
  status: "queued" | "running" | "succeeded" | "failed";
  counts?: { parents?: number; children?: number };
  error?: string;
}

export interface Me {
  principal: { type: string; id: string; tenant_id: string };
  tools: string[];
  write_actions: string[];
}
