// A real Docusaurus site for the widget's browser tests: the sample corpus (../../samples/*.md) as
// its docs, and citegate's plugin adding the Ask widget. CITEGATE_URL is the citegate API the
// built pages talk to (the tests build the site against the server they start).
const citegateUrl = process.env.CITEGATE_URL || "http://127.0.0.1:8099";

module.exports = {
  title: "citegate sample docs",
  url: "http://127.0.0.1",
  baseUrl: "/",
  trailingSlash: true, // /docs/x/ -> docs/x/index.html: any static host serves it without a redirect
  onBrokenLinks: "throw",
  favicon: undefined,
  markdown: { format: "detect" }, // .md files as CommonMark, not MDX
  i18n: { defaultLocale: "en", locales: ["en"] },
  presets: [
    [
      "@docusaurus/preset-classic",
      {
        docs: { path: "../../samples", include: ["*.md"], exclude: ["README.md"], routeBasePath: "docs", sidebarPath: require.resolve("./sidebars.js") },
        blog: false,
        pages: {},
        theme: { customCss: require.resolve("./src/css/custom.css") },
      },
    ],
  ],
  themeConfig: {
    navbar: { title: "citegate sample docs", items: [{ type: "docSidebar", sidebarId: "docs", label: "Docs" }] },
  },
  plugins: [["citegate-docusaurus-plugin", { citegateUrl, project: "citegate-docs-site", version: "main" }]],
};
