// A table of records with its column headers, or the view's words for an empty list.
import type { ComponentChildren, VNode } from "preact";

export function DataTable<T>({
  rows,
  columns,
  row,
  caption,
  empty,
  class: className,
}: {
  /** The records; undefined while they have not loaded (then nothing is shown). */
  rows: readonly T[] | undefined;
  columns: readonly string[];
  /** One <tr> a record, keyed. */
  row: (item: T) => VNode;
  /** For screen readers only (the section's heading names it on screen). */
  caption?: ComponentChildren;
  /** Shown instead of the table when there are no records. */
  empty?: ComponentChildren;
  class?: string;
}) {
  if (!rows) return null;
  if (rows.length === 0) return empty ? <p>{empty}</p> : null;
  return (
    <table class={className}>
      {caption ? <caption class="sr-only">{caption}</caption> : null}
      <thead>
        <tr>
          {columns.map((column) => (
            <th key={column} scope="col">
              {column}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{rows.map(row)}</tbody>
    </table>
  );
}
