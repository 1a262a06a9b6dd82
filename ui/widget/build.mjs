// The page widget: one self-contained script, <outdir>/widget.js (an IIFE: a classic <script> tag
// works on any page, with no module loader). Its gzipped size is printed, as the README states it.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));

export async function build(esbuild, outdir) {
  const outfile = join(outdir, "widget.js");
  await esbuild.build({
    entryPoints: [join(here, "src", "main.tsx")],
    bundle: true,
    minify: true,
    sourcemap: false,
    format: "iife",
    target: ["es2020"],
    jsx: "automatic",
    jsxImportSource: "preact",
    legalComments: "none",
    outfile,
    logLevel: "warning",
  });
  const bytes = readFileSync(outfile);
  const kb = (n) => (n / 1024).toFixed(1);
  console.log(`widget.js: ${kb(bytes.length)} kB, ${kb(gzipSync(bytes, { level: 9 }).length)} kB gzipped`);
}
