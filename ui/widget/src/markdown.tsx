// A small Markdown renderer that builds Preact elements, never HTML strings: whatever the answer
// holds (a <script>, an onerror attribute) ends up as text. Enough for answers: paragraphs,
// headings, lists, quotes, fenced code, inline code, emphasis, links and [n] citation markers.
import type { ComponentChildren, VNode } from "preact";

export type CiteLink = (n: number, key: string) => VNode | null;

/** Only http(s), relative and fragment links are rendered as links (no javascript:, data:...). */
export function safeHref(href: string, base: string = location.href): string | null {
  const trimmed = href.trim();
  if (!trimmed) return null;
  try {
    const url = new URL(trimmed, base);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|(?<![\w])_([^_\s][^_]*)_(?![\w])|\[([^\]]+)\]\(([^)\s]+)\)|\[(\d{1,3})\]/g;

export function inline(text: string, cite: CiteLink, prefix = "i"): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  let last = 0;
  let n = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > last) out.push(text.slice(last, at));
    const key = `${prefix}${n++}`;
    if (m[1]) out.push(<code key={key}>{m[2]}</code>);
    else if (m[3] ?? m[4]) out.push(<strong key={key}>{inline(m[3] ?? m[4], cite, key)}</strong>);
    else if (m[5] ?? m[6]) out.push(<em key={key}>{inline(m[5] ?? m[6], cite, key)}</em>);
    else if (m[7]) {
      const href = safeHref(m[8]);
      out.push(href ? <a key={key} href={href} target="_blank" rel="noopener noreferrer">{m[7]}</a> : m[7]);
    } else if (m[9]) out.push(cite(Number(m[9]), key) ?? m[0]);
    last = at + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

type Block =
  | { kind: "code"; lang: string; text: string }
  | { kind: "heading"; level: number; text: string }
  | { kind: "list"; ordered: boolean; items: string[] }
  | { kind: "quote"; text: string }
  | { kind: "para"; text: string };

export function blocks(source: string): Block[] {
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  const out: Block[] = [];
  let para: string[] = [];
  const flush = () => {
    if (para.length) out.push({ kind: "para", text: para.join(" ") });
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```+|~~~+)\s*([\w+-]*)/.exec(line);
    if (fence) {
      flush();
      const body: string[] = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
      out.push({ kind: "code", lang: fence[2], text: body.join("\n") });
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*([-*+]|\d{1,3}[.)])\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      out.push({ kind: "heading", level: heading[1].length, text: heading[2] });
    } else if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const prev = out[out.length - 1];
      if (prev?.kind === "list" && prev.ordered === ordered) prev.items.push(item[2]);
      else out.push({ kind: "list", ordered, items: [item[2]] });
    } else if (/^\s*>/.test(line)) {
      flush();
      const prev = out[out.length - 1];
      const text = line.replace(/^\s*>\s?/, "");
      if (prev?.kind === "quote") prev.text += " " + text;
      else out.push({ kind: "quote", text });
    } else if (!line.trim()) {
      flush();
    } else {
      const prev = out[out.length - 1];
      // A continuation line of a list item belongs to it.
      if (!para.length && prev?.kind === "list" && /^\s+/.test(line)) prev.items[prev.items.length - 1] += " " + line.trim();
      else para.push(line.trim());
    }
  }
  flush();
  return out;
}

export function Markdown({ source, cite }: { source: string; cite: CiteLink }) {
  return (
    <div class="md">
      {blocks(source).map((b, i) => {
        const key = `b${i}`;
        switch (b.kind) {
          case "code":
            return (
              <pre key={key} tabIndex={0} aria-label={b.lang ? `${b.lang} code` : "code"}>
                <code>{b.text}</code>
              </pre>
            );
          case "heading":
            // Answer headings sit under the dialog's own heading: never above level 3.
            return b.level <= 3 ? <h3 key={key}>{inline(b.text, cite, key)}</h3> : <h4 key={key}>{inline(b.text, cite, key)}</h4>;
          case "list": {
            const items = b.items.map((t, j) => <li key={j}>{inline(t, cite, `${key}_${j}`)}</li>);
            return b.ordered ? <ol key={key}>{items}</ol> : <ul key={key}>{items}</ul>;
          }
          case "quote":
            return <blockquote key={key}>{inline(b.text, cite, key)}</blockquote>;
          default:
            return <p key={key}>{inline(b.text, cite, key)}</p>;
        }
      })}
    </div>
  );
}
