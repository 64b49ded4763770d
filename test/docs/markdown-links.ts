/**
 * Reads Markdown the way GitHub renders it, as far as links go: the
 * headings' anchors (github-slugger's rules), explicit `id`s, and every
 * relative link and image. `checkDocs` returns one sentence per broken link
 * and per page the README cannot reach; pure over a map of files, so the
 * rules are tested on made-up pages as well as on the real ones.
 */
import { posix } from "node:path";

/** A link as written, where it was found. */
export interface Link {
  target: string;
  line: number;
  image: boolean;
}

/** Lines outside fenced code blocks, with their line numbers (1-based); code lines come back empty. */
function proseLines(text: string): string[] {
  const lines = text.split(/\r?\n/);
  let fence: string | undefined;
  return lines.map((line) => {
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      if (open && open[1]![0] === fence[0] && open[1]!.length >= fence.length && line.trim() === open[1]) fence = undefined;
      return "";
    }
    if (open) {
      fence = open[1]!;
      return "";
    }
    return line;
  });
}

/** Inline code spans (which may wrap lines, not paragraphs) blanked out, newlines kept, so nothing inside them reads as a link. */
const blankCode = (text: string) => text.replace(/(`+)((?:(?!\n[ \t]*\n)[\s\S])*?)\1/g, (m) => m.replace(/[^\n]/g, " "));

/**
 * The text GitHub shows for a heading's Markdown: code spans keep their
 * content, links and images their text, HTML tags and emphasis marks go.
 */
export function headingText(markdown: string): string {
  const parts: string[] = [];
  let rest = markdown;
  // code spans are taken out first: nothing inside them is markup
  for (let m = /(`+)([\s\S]*?)\1/.exec(rest); m; m = /(`+)([\s\S]*?)\1/.exec(rest)) {
    parts.push(plain(rest.slice(0, m.index)), m[2]!.trim());
    rest = rest.slice(m.index + m[0].length);
  }
  parts.push(plain(rest));
  return parts.join("");
}

function plain(text: string): string {
  return text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/\*+/g, "")
    .replace(/(^|[^\p{L}\p{N}])_{1,2}(?=\S)([^_]*?\S)_{1,2}(?=[^\p{L}\p{N}]|$)/gu, "$1$2")
    .replace(/\\(.)/g, "$1");
}

/** github-slugger: lowercase; drop everything but letters, marks, digits, `_`, `-` and spaces; each space a hyphen. */
export const slug = (text: string) => text.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "").replace(/ /g, "-");

/** The anchors of a page: its headings' slugs (repeats get -1, -2, ...) and any `id="..."` or `name="..."` in its HTML. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const headings = new Set<string>();
  const out = new Set<string>();
  for (const line of proseLines(text)) {
    const h = /^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (h) {
      const base = slug(headingText(h[1] ?? "").trim());
      let id = base;
      // github-slugger: the next free of base, base-1, base-2, ...
      while (headings.has(id)) {
        const n = (seen.get(base) ?? 0) + 1;
        seen.set(base, n);
        id = `${base}-${n}`;
      }
      headings.add(id);
      out.add(id);
    }
    for (const m of blankCode(line).matchAll(/<[a-z][^>]*\s(?:id|name)="([^"]+)"/gi)) out.add(m[1]!);
  }
  return out;
}

/** Every link and image of a page outside code: `[t](x)`, `![a](x)`, `[id]: x`, `<a href>`, `<img src>`; a link's text may wrap lines. */
export function links(text: string): Link[] {
  const prose = blankCode(proseLines(text).join("\n"));
  const lineAt = (index: number) => prose.slice(0, index).split("\n").length;
  const out: { link: Link; at: number }[] = [];
  for (const m of prose.matchAll(/(!?)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) {
    out.push({ at: m.index!, link: { target: m[2]!, line: lineAt(m.index!), image: m[1] === "!" } });
  }
  for (const m of prose.matchAll(/^ {0,3}\[[^\]\n]+\]:[ \t]*<?(\S+?)>?(?:[ \t]+"[^"\n]*")?[ \t]*$/gm)) {
    out.push({ at: m.index!, link: { target: m[1]!, line: lineAt(m.index!), image: false } });
  }
  for (const m of prose.matchAll(/<(a|img)\s[^>]*?\b(href|src)="([^"]*)"/gi)) {
    out.push({ at: m.index!, link: { target: m[3]!, line: lineAt(m.index!), image: m[1]!.toLowerCase() === "img" } });
  }
  return out.sort((a, b) => a.at - b.at).map((o) => o.link);
}

/** What the checker may ask of the repository. */
export interface Files {
  /** A file's text, or undefined when there is no such file. */
  read(path: string): string | undefined;
  /** Whether a file or a directory is there. */
  exists(path: string): boolean;
}

const external = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//");

/**
 * Checks `pages` (repository-relative paths, README.md first): each relative
 * link names a file that exists, each `#anchor` a heading or id of its page,
 * and every page is reachable from the first through links. Returns what is
 * wrong, one sentence each; empty when all is well.
 */
export function checkDocs(pages: string[], files: Files): string[] {
  const problems: string[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = (path: string) => {
    let set = anchorCache.get(path);
    if (!set) anchorCache.set(path, (set = anchors(files.read(path) ?? "")));
    return set;
  };
  const linked = new Map<string, Set<string>>();

  for (const page of pages) {
    const text = files.read(page);
    if (text === undefined) {
      problems.push(`${page}: no such page`);
      continue;
    }
    const to = new Set<string>();
    linked.set(page, to);
    for (const link of links(text)) {
      const where = `${page}:${link.line}`;
      if (link.target === "") {
        problems.push(`${where}: an empty link`);
        continue;
      }
      if (external(link.target)) continue;
      const hash = link.target.indexOf("#");
      const pathPart = hash === -1 ? link.target : link.target.slice(0, hash);
      const anchor = hash === -1 ? undefined : decodeURIComponent(link.target.slice(hash + 1));
      const target = pathPart === "" ? page : posix.normalize(posix.join(posix.dirname(page), decodeURIComponent(pathPart.split("?")[0]!)));
      if (target.startsWith("../") || posix.isAbsolute(target)) {
        problems.push(`${where}: ${link.target} points outside the repository`);
        continue;
      }
      if (!files.exists(target)) {
        problems.push(`${where}: ${link.image ? "image" : "link"} ${link.target}: ${target} does not exist`);
        continue;
      }
      if (target.endsWith(".md")) to.add(target);
      if (anchor !== undefined) {
        if (!target.endsWith(".md")) problems.push(`${where}: ${link.target}: an anchor into a file that is not Markdown`);
        else if (!anchorsOf(target).has(anchor)) problems.push(`${where}: ${link.target}: ${target} has no heading or id "${anchor}"`);
      }
    }
  }

  // every page reachable from the first through links between the pages
  const reached = new Set([pages[0]!]);
  const queue = [pages[0]!];
  while (queue.length) for (const next of linked.get(queue.shift()!) ?? []) if (!reached.has(next) && linked.has(next)) reached.add(next), queue.push(next);
  for (const page of pages) if (!reached.has(page) && linked.has(page)) problems.push(`${page}: no chain of links leads to it from ${pages[0]}`);
  return problems;
}
