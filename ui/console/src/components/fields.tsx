// Labelled fields: a label tied to its control by id (what a screen reader names it, and what
// the browser tests find it by), the control's value as a string, nothing wrapped around them so
// that a grid or inline form lays the pair out itself.
import type {
  ComponentChildren,
  InputHTMLAttributes,
  LooseInputHTMLAttributes,
  LooseSelectHTMLAttributes,
  SelectHTMLAttributes,
  TextareaHTMLAttributes,
} from "preact";
import { useState } from "preact/hooks";

interface Labelled {
  id: string;
  label: ComponentChildren;
  /** Called with the new value; without it the control is uncontrolled (read from the form). */
  onValue?: (value: string) => void;
}

const valueOf = (event: Event) => (event.target as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement).value;

export function TextField({
  id,
  label,
  onValue,
  on = "input",
  ...rest
}: Labelled &
  Omit<LooseInputHTMLAttributes<HTMLInputElement>, "id" | "onInput" | "onChange"> & {
    /** "change": take the value when the person leaves the field (or picks a date), not per key. */
    on?: "input" | "change";
    /** The id of a <datalist> of suggestions. */
    list?: string;
  }) {
  const update = onValue && ((event: Event) => onValue(valueOf(event)));
  // The props are typed loosely and cast here: preact types an <input>'s props as a union over
  // its type and role, which no Omit<> keeps.
  return (
    <>
      <label for={id}>{label}</label>
      <input
        id={id}
        {...(rest as InputHTMLAttributes<HTMLInputElement>)}
        onInput={on === "input" ? update : undefined}
        onChange={on === "change" ? update : undefined}
      />
    </>
  );
}

export function TextArea({
  id,
  label,
  onValue,
  ...rest
}: Labelled & Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, "id" | "onInput" | "onChange">) {
  return (
    <>
      <label for={id}>{label}</label>
      <textarea id={id} {...rest} onInput={onValue && ((event: Event) => onValue(valueOf(event)))} />
    </>
  );
}

export function SelectField({
  id,
  label,
  onValue,
  options,
  ...rest
}: Labelled &
  Omit<LooseSelectHTMLAttributes<HTMLSelectElement>, "id" | "onInput" | "onChange"> & {
    /** [value, text] of each option, in order. */
    options: readonly (readonly [string, string])[];
  }) {
  return (
    <>
      <label for={id}>{label}</label>
      <select
        id={id}
        {...(rest as SelectHTMLAttributes<HTMLSelectElement>)}
        onChange={onValue && ((event: Event) => onValue(valueOf(event)))}
      >
        {options.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </>
  );
}

/** The text fields of a create form: each bound to a TextField, all emptied once it is sent. */
export function useFields<T extends Record<string, string>>(initial: T) {
  const [values, setValues] = useState(initial);
  return {
    values,
    bind: (name: keyof T) => ({
      value: values[name],
      onValue: (value: string) => setValues((all) => ({ ...all, [name]: value })),
    }),
    reset: () => setValues(initial),
  };
}
