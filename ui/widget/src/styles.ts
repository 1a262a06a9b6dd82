// The widget's stylesheet, inside its shadow root: the host page's CSS cannot reach in, and this
// cannot leak out. Colours come from CSS variables a host page may set (on :root or on
// #citegate-widget): --citegate-accent, --citegate-accent-text, --citegate-bg, --citegate-fg,
// --citegate-muted, --citegate-border, --citegate-surface, --citegate-font, --citegate-radius,
// --citegate-z. Defaults follow prefers-color-scheme, with contrast of at least 4.5:1.
export const css = `
:host { all: initial; }
:host {
  --accent: var(--citegate-accent, #0b57d0);
  --accent-text: var(--citegate-accent-text, #ffffff);
  --bg: var(--citegate-bg, #ffffff);
  --fg: var(--citegate-fg, #1f2328);
  --muted: var(--citegate-muted, #57606a);
  --border: var(--citegate-border, #d0d7de);
  --surface: var(--citegate-surface, #f6f8fa);
  --warn: var(--citegate-warn, #9a3412);
  --radius: var(--citegate-radius, 10px);
  --font: var(--citegate-font, system-ui, -apple-system, "Segoe UI", Roboto, "PingFang SC", "Microsoft YaHei", sans-serif);
}
@media (prefers-color-scheme: dark) {
  :host {
    --accent: var(--citegate-accent, #8ab4f8);
    --accent-text: var(--citegate-accent-text, #0d1117);
    --bg: var(--citegate-bg, #1b1f24);
    --fg: var(--citegate-fg, #e6edf3);
    --muted: var(--citegate-muted, #a8b3bf);
    --border: var(--citegate-border, #3d444d);
    --surface: var(--citegate-surface, #262c33);
    --warn: var(--citegate-warn, #fdba74);
  }
}
* { box-sizing: border-box; }
.root { font: 15px/1.5 var(--font); color: var(--fg); }
button, input { font: inherit; color: inherit; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.launcher {
  position: fixed; right: 20px; bottom: 20px; z-index: var(--citegate-z, 2147483000);
  display: inline-flex; align-items: center; gap: 8px; padding: 10px 16px; border-radius: 999px;
  border: 1px solid transparent; background: var(--accent); color: var(--accent-text);
  box-shadow: 0 4px 14px rgba(0,0,0,.25); cursor: pointer; font-weight: 600;
}
.launcher kbd { font: 12px/1 var(--font); padding: 3px 5px; border-radius: 4px; background: rgba(0,0,0,.18); }
.backdrop {
  position: fixed; inset: 0; z-index: var(--citegate-z, 2147483000); background: rgba(0,0,0,.45);
  display: flex; align-items: flex-start; justify-content: center; padding: 6vh 12px 12px;
}
.dialog {
  width: min(680px, 100%); max-height: 88vh; display: flex; flex-direction: column;
  background: var(--bg); color: var(--fg); border: 1px solid var(--border); border-radius: var(--radius);
  box-shadow: 0 12px 40px rgba(0,0,0,.35);
}
@media (max-width: 560px) { .backdrop { padding: 0; } .dialog { max-height: 100vh; height: 100%; border-radius: 0; } }
header { display: flex; align-items: center; gap: 8px; padding: 12px 16px; border-bottom: 1px solid var(--border); }
h2 { font-size: 16px; margin: 0; flex: 1; }
.ghost {
  background: transparent; border: 1px solid var(--border); border-radius: 6px; padding: 4px 10px; cursor: pointer;
}
.ghost:hover { background: var(--surface); }
.log { overflow-y: auto; padding: 12px 16px; flex: 1; min-height: 120px; }
.intro { color: var(--muted); margin: 4px 0 12px; }
.turn { margin: 0 0 18px; }
.q { font-weight: 600; margin: 0 0 6px; }
.q .who, .who { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.md p, .md ul, .md ol, .md blockquote, .md pre { margin: 0 0 10px; }
.md h3, .md h4 { font-size: 15px; margin: 12px 0 6px; }
.md pre { background: var(--surface); border: 1px solid var(--border); border-radius: 6px; padding: 10px; overflow-x: auto; }
.md code { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.md :not(pre) > code { background: var(--surface); padding: 1px 4px; border-radius: 4px; }
.md blockquote { border-left: 3px solid var(--border); padding-left: 10px; color: var(--muted); }
a { color: var(--accent); text-underline-offset: 2px; }
.cite { font-size: 12px; vertical-align: super; line-height: 0; text-decoration: none; padding: 0 1px; }
.confidence { color: var(--muted); font-size: 13px; margin: 6px 0; }
.confidence strong { color: var(--fg); }
h3.sub { font-size: 13px; text-transform: none; color: var(--muted); margin: 10px 0 4px; }
ol.sources { margin: 0; padding-left: 22px; font-size: 14px; }
ol.sources li { margin: 0 0 6px; }
.meta { color: var(--muted); font-size: 12px; display: block; overflow-wrap: anywhere; }
.noanswer { border: 1px solid var(--border); border-left: 4px solid var(--warn); border-radius: 6px; padding: 8px 12px; background: var(--surface); }
.noanswer p { margin: 4px 0 8px; }
.actions { display: flex; flex-wrap: wrap; align-items: center; gap: 8px; margin-top: 8px; font-size: 13px; color: var(--muted); }
.actions button[aria-pressed="true"] { background: var(--accent); color: var(--accent-text); border-color: var(--accent); }
.status { font-size: 13px; color: var(--muted); }
.error { color: var(--warn); }
.pending { color: var(--muted); font-style: italic; }
form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--border); }
label.field { flex: 1; display: flex; }
input[type="text"] {
  flex: 1; min-width: 0; padding: 8px 10px; border: 1px solid var(--border); border-radius: 6px; background: var(--bg);
}
.primary { background: var(--accent); color: var(--accent-text); border: 0; border-radius: 6px; padding: 8px 16px; cursor: pointer; font-weight: 600; }
.primary[disabled] { opacity: .7; cursor: progress; }
[aria-disabled="true"] { cursor: default; }
.foot { font-size: 12px; color: var(--muted); padding: 0 16px 10px; margin: 0; }
`;
