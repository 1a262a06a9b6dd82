// citegate's page widget: one <script src=".../widget.js"> adds an "Ask" entry to the page.
// Everything it draws lives in a shadow root; it talks only to the configured citegate URL.
import { render } from "preact";
import { readConfig } from "./config";
import { App } from "./app";
import { css } from "./styles";
import { stringsFor } from "./i18n";
import { AnswerClient } from "./api";

declare global {
  interface Window {
    citegateConfig?: Record<string, unknown>;
    citegate?: { open: (question?: string) => void; close: () => void; version: string };
  }
}

// Captured now: document.currentScript is only set while the script first runs.
const script = document.currentScript as HTMLScriptElement | null;

function mount(): void {
  if (document.getElementById("citegate-widget")) return; // the script included twice
  const config = readConfig(script, window.citegateConfig ?? {});
  const host = document.createElement("div");
  host.id = "citegate-widget";
  const shadow = host.attachShadow({ mode: "open" });
  // A constructed stylesheet is CSSOM, outside the host page's CSP style-src: a page with a strict
  // policy needs to allow only the script itself and the citegate URL (connect-src).
  if ("adoptedStyleSheets" in shadow && "replaceSync" in CSSStyleSheet.prototype) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    shadow.adoptedStyleSheets = [sheet];
  } else {
    const style = document.createElement("style");
    style.textContent = css;
    shadow.appendChild(style);
  }
  const container = document.createElement("div");
  shadow.appendChild(container);
  document.body.appendChild(host);
  const { strings, lang } = stringsFor(config.lang);
  const client = new AnswerClient(config.apiUrl, config.token, config.sessions);
  const controls: { open?: (q?: string) => void; close?: () => void } = {};
  render(<App config={config} client={client} strings={strings} lang={lang} shadow={shadow} controls={controls} />, container);
  window.citegate = {
    open: (question?: string) => controls.open?.(question),
    close: () => controls.close?.(),
    version: "1",
  };
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mount, { once: true });
else mount();
