// citegate's Docusaurus plugin: one <script> tag on every page, which adds the Ask widget.
// The widget reads the page's scope itself when a question is asked (the section from the URL
// under the site's baseUrl, the docs version from Docusaurus's docsearch:version meta), so client
// side navigation needs nothing from here.
"use strict";

const ATTRIBUTES = {
  project: "data-project",
  paths: "data-paths",
  version: "data-version",
  pathPrefix: "data-path-prefix",
  pathDepth: "data-path-depth",
  shortcut: "data-shortcut",
  button: "data-button",
  sessions: "data-sessions",
  lang: "data-lang",
  tokenFunction: "data-token-function",
  workingDocs: "data-working-docs",
};

function validate(options) {
  const url = options && options.citegateUrl;
  if (typeof url !== "string" || !/^https?:\/\/[^/]+/.test(url)) {
    throw new Error("citegate-docusaurus-plugin: `citegateUrl` must be the http(s) URL of the citegate API");
  }
  for (const key of Object.keys(options)) {
    if (key !== "id" && key !== "citegateUrl" && key !== "scriptUrl" && !(key in ATTRIBUTES)) {
      throw new Error(`citegate-docusaurus-plugin: unknown option \`${key}\``);
    }
  }
  return options;
}

module.exports = function citegatePlugin(context, options) {
  const opts = validate(options);
  const apiUrl = opts.citegateUrl.replace(/\/+$/, "");
  const attributes = { src: opts.scriptUrl || `${apiUrl}/widget.js`, defer: true, "data-citegate-url": apiUrl };
  for (const [key, name] of Object.entries(ATTRIBUTES)) {
    const value = opts[key];
    if (value === undefined || value === null) continue;
    attributes[name] = Array.isArray(value) ? value.join(",") : String(value);
  }
  return {
    name: "citegate-docusaurus-plugin",
    injectHtmlTags() {
      return {
        headTags: [
          // Page paths are keyed under the site's baseUrl ("/docs/x" on a site served at "/site/").
          { tagName: "meta", attributes: { name: "citegate:base-url", content: context.baseUrl } },
          { tagName: "link", attributes: { rel: "preconnect", href: new URL(apiUrl).origin } },
          { tagName: "script", attributes },
        ],
      };
    },
  };
};

module.exports.validateOptions = ({ options }) => validate(options);
