// What the console says back: an API error as the API said it, a notice, a status badge, loading.
import type { ComponentChildren } from "preact";
import { describe } from "../api";

export function ErrorBox({ error, label }: { error: unknown; label?: string }) {
  if (!error) return null;
  const { code, message, status, requestId } = describe(error);
  return (
    <div class="error" role="alert">
      <strong>{label ?? "The request failed"}:</strong> <code class="code">{code}</code>
      {status ? <span class="muted"> (HTTP {status})</span> : null} — {message}
      {requestId ? <div class="muted small">request {requestId}</div> : null}
    </div>
  );
}

/** A status line (role=status, announced); nothing at all while there is nothing to say, so a
 * view can pass its message state as it is: `<Notice>{message}</Notice>`. */
export function Notice({ children }: { children?: ComponentChildren }) {
  if (children === null || children === undefined || children === false || children === "") return null;
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

export function Badge({ value }: { value: string }) {
  return <span class={`badge badge-${value.replace(/[^a-z_]/gi, "")}`}>{value}</span>;
}

export function Loading() {
  return <p aria-live="polite">Loading…</p>;
}
