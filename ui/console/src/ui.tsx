// Small shared pieces: an API error as the API said it, a status badge, data loading with errors.
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { describe } from "./api";

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

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

export function Badge({ value }: { value: string }) {
  return <span class={`badge badge-${value.replace(/[^a-z_]/gi, "")}`}>{value}</span>;
}

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="panel" aria-label={title}>
      <div class="panel-head">
        <h2>{title}</h2>
        {actions ? <div class="panel-actions">{actions}</div> : null}
      </div>
      {children}
    </section>
  );
}

/** Load something, reload on demand; errors are kept and shown, never swallowed. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => Promise<void>;
} {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const current = useRef(0);
  const reload = useCallback(async () => {
    const ticket = ++current.current;
    setLoading(true);
    try {
      const value = await load();
      if (ticket === current.current) {
        setData(value);
        setError(null);
      }
    } catch (failure) {
      if (ticket === current.current) setError(failure);
    } finally {
      if (ticket === current.current) setLoading(false);
    }
  }, deps);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, error, loading, reload };
}

/** Run an action with a busy flag and its error kept for display. */
export function useAction(): {
  busy: boolean;
  error: unknown;
  run: <T>(action: () => Promise<T>) => Promise<T | undefined>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async <T,>(action: () => Promise<T>) => {
    setBusy(true);
    setError(null);
    try {
      return await action();
    } catch (failure) {
      setError(failure);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(null) };
}

export function formatTime(iso?: string | null): string {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function formatBytes(size?: number): string {
  if (size === undefined || size === null) return "";
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} kB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}
