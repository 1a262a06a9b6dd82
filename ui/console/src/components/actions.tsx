// Acting on the API from a button or a form: busy while the call runs (the control is disabled),
// the error kept for an ErrorBox, and what to do with the answer only when there is one.
import type { ButtonHTMLAttributes, ComponentChildren, FormHTMLAttributes } from "preact";
import { useCallback, useState } from "preact/hooks";

export interface Action {
  busy: boolean;
  error: unknown;
  run: <T>(action: () => Promise<T>) => Promise<T | undefined>;
  clear: () => void;
}

/** Run an action with a busy flag and its error kept for display. */
export function useAction(): Action {
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

interface Acts<T> {
  /** Whose busy flag disables the control and whose error the view shows. */
  action: Action;
  /** The call (and whatever the view resets as it starts). */
  run: () => Promise<T>;
  /** What to do with the answer; not called when the call failed. */
  onDone?: (result: T) => unknown;
}

async function act<T>({ action, run, onDone }: Acts<T>): Promise<void> {
  const result = await action.run(run);
  if (result) await onDone?.(result);
}

type ButtonProps = Omit<ButtonHTMLAttributes<HTMLButtonElement>, "type" | "onClick" | "action">;

/** A button that runs one call; with `confirm`, only once the person has said yes to it. */
export function ActionButton<T>({
  action,
  run,
  onDone,
  confirm: question,
  busyLabel,
  disabled,
  children,
  ...rest
}: Acts<T> & ButtonProps & { confirm?: string; busyLabel?: string; children: ComponentChildren }) {
  return (
    <button
      type="button"
      {...rest}
      disabled={Boolean(disabled) || action.busy}
      onClick={async () => {
        if (question && !confirm(question)) return;
        await act({ action, run, onDone });
      }}
    >
      {action.busy && busyLabel ? busyLabel : children}
    </button>
  );
}

/** A form whose submit (a click or Enter) runs one call, unless it is not `ready` to be sent. */
export function ActionForm<T>({
  action,
  run,
  onDone,
  ready = true,
  children,
  ...rest
}: Acts<T> & Omit<FormHTMLAttributes<HTMLFormElement>, "onSubmit" | "action"> & { ready?: boolean; children: ComponentChildren }) {
  return (
    <form
      {...rest}
      onSubmit={async (event) => {
        event.preventDefault();
        if (ready) await act({ action, run, onDone });
      }}
    >
      {children}
    </form>
  );
}

/** The submit button of an ActionForm: disabled while its action runs, saying so when asked to. */
export function SubmitButton({
  action,
  busyLabel,
  disabled,
  children,
  ...rest
}: Omit<ButtonProps, "action"> & { action: Action; busyLabel?: string; children: ComponentChildren }) {
  return (
    <button type="submit" {...rest} disabled={Boolean(disabled) || action.busy}>
      {action.busy && busyLabel ? busyLabel : children}
    </button>
  );
}
