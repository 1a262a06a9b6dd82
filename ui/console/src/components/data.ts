// Loading what a view shows, and the formats every view prints times and sizes in.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

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
