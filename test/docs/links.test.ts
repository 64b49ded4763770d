/**
 * README.md and every page under docs/: each relative link points at a file
 * that exists, each #anchor at a heading (GitHub's anchor rules) or id that
 * exists, each image exists, and README leads to every page. Files only:
 * no network, no server.
 */
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { anchors, checkDocs, headingText, links, slug, type Files } from "./markdown-links.ts";

const root = join(import.meta.dir, "..", "..");

const onDisk: Files = {
  read: (path) => (existsSync(join(root, path)) ? readFileSync(join(root, path), "utf8") : undefined),
  exists: (path) => existsSync(join(root, path)),
};

const docsPages = (readdirSync(join(root, "docs"), { recursive: true }) as string[])
  .map((p) => `docs/${p.split("\\").join("/")}`)
  .filter((p) => p.endsWith(".md"))
  .sort();

/** Made-up pages in memory, for the checker's own rules. */
const inMemory = (pages: Record<string, string>, other: string[] = []): Files => ({
  read: (path) => pages[path],
  exists: (path) => path in pages || other.includes(path) || Object.keys(pages).some((p) => p.startsWith(`${path}/`)),
});

test("README.md and every page under docs/: links, anchors and images resolve, and README reaches every page", () => {
  expect(docsPages.length).toBeGreaterThan(0);
  expect(checkDocs(["README.md", ...docsPages], onDisk)).toEqual([]);
});

test("the pages the documentation promises are there", () => {
  for (const page of ["install", "production", "agent", "inspector", "access", "cluster", "operations", "admin-api", "limits", "architecture", "performance", "testing"]) {
    expect(docsPages).toContain(`docs/${page}.md`);
  }
  for (const page of ["cli", "api", "codes"]) expect(docsPages).toContain(`docs/reference/${page}.md`);
});

test("anchors follow GitHub's rules: lowercase, punctuation dropped but hyphens, spaces to hyphens, markup gone", () => {
  const cases: [string, string][] = [
    ["Beyond the spec: `POST /api/backup`", "beyond-the-spec-post-apibackup"],
    ["Beyond the spec: admin API keys, `/api/keys`", "beyond-the-spec-admin-api-keys-apikeys"],
    ["burrow.yml", "burrowyml"],
    ["`--log` and `--log-level`", "--log-and---log-level"],
    ["Monitoring: metrics, health checks, logs", "monitoring-metrics-health-checks-logs"],
    ["Last run: 2026-11-22, 2 cores, quiet machine", "last-run-2026-11-22-2-cores-quiet-machine"],
    ["Flags (`burrow http` and `burrow tcp`)", "flags-burrow-http-and-burrow-tcp"],
    ["**Bold** and *slanted* and _under_ but snake_case stays", "bold-and-slanted-and-under-but-snake_case-stays"],
    ["A [link](x.md) and `code_with_underscores`", "a-link-and-code_with_underscores"],
    ["Who may reach a tunnel?", "who-may-reach-a-tunnel"],
    ["Ünïcode — dashes – go", "ünïcode--dashes--go"],
  ];
  for (const [heading, anchor] of cases) expect(slug(headingText(heading))).toBe(anchor);
});

test("a heading used twice gets -1, then -2; explicit ids count as anchors; headings in code blocks do not", () => {
  const page = ["# Flags", "## Flags", "### Flags", '<a id="by-hand"></a>', "```sh", "# not a heading", "```", "## Flags-1 ##"].join("\n");
  expect([...anchors(page)].sort()).toEqual(["by-hand", "flags", "flags-1", "flags-1-1", "flags-2"].sort());
});

test("links are read from text (wrapped over lines too), images, reference definitions and HTML, never from code", () => {
  const page = [
    "See [a](a.md#x), ![pic](images/p.png \"title\") and `[not](code.md)`, then [a link whose text",
    "wraps](wrapped.md#w) and ``[nor `this`](code.md)``.",
    "[ref]: other.md",
    '<img src="images/q.png" alt=""> <a href="b.md">b</a>',
    "```",
    "[inside](fence.md)",
    "```",
  ].join("\n");
  expect(links(page).map((l) => [l.target, l.line, l.image])).toEqual([
    ["a.md#x", 1, false],
    ["images/p.png", 1, true],
    ["wrapped.md#w", 1, false],
    ["other.md", 3, false],
    ["images/q.png", 4, true],
    ["b.md", 4, false],
  ]);
});

test("the checker fails on a missing file, a missing anchor, a missing image, a moved section and an unreachable page", () => {
  const pages = {
    "README.md": "# Top\n[guide](docs/guide.md#setting-up) [gone](docs/gone.md) ![shot](docs/images/none.png) [here](#top) [moved](#limits)",
    "docs/guide.md": "# Guide\n## Set up\n[back](../README.md#top) [self](#set-up)",
    "docs/orphan.md": "# Nobody links here",
  };
  expect(checkDocs(["README.md", "docs/guide.md", "docs/orphan.md"], inMemory(pages))).toEqual([
    'README.md:2: docs/guide.md#setting-up: docs/guide.md has no heading or id "setting-up"',
    "README.md:2: link docs/gone.md: docs/gone.md does not exist",
    "README.md:2: image docs/images/none.png: docs/images/none.png does not exist",
    'README.md:2: #limits: README.md has no heading or id "limits"',
    "docs/orphan.md: no chain of links leads to it from README.md",
  ]);
  const fixed = { ...pages, "README.md": "# Top\n[guide](docs/guide.md#set-up) [orphan](docs/orphan.md) ![shot](docs/images/p.png)" };
  expect(checkDocs(["README.md", "docs/guide.md", "docs/orphan.md"], inMemory(fixed, ["docs/images/p.png"]))).toEqual([]);
});
