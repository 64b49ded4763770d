/**
 * A command's --help, made from its flag table: the table parseFlags reads,
 * so the help cannot name a flag the parser does not take, nor leave one
 * out. docs/reference/cli.md is made from the same tables
 * (build/reference/cli.ts), with the words of `details` added.
 */
import { envName, HELP_FLAG, type FlagSpec, type FlagTable } from "../config/flags.ts";

export interface FlagGroup {
  /** The line above the group's flags, e.g. "Flags:". */
  title: string;
  /** The group's flags, in the order shown. */
  flags: readonly string[];
}

/** Everything a command's help says. */
export interface CommandDoc {
  /** The words after `burrow`: "server init". */
  name: string;
  /** Usage lines, each without "Usage: ". */
  usage: readonly string[];
  /** Plain text between the usage and the flags. */
  about?: string;
  /** The flags the help lists, as parsed (--help aside: every command has it). */
  flags: FlagTable;
  /** The flags under titles, in this order, each flag in exactly one; default: all under "Flags:", in the table's order. */
  groups?: readonly FlagGroup[];
  /** Plain text after the flags. */
  after?: string;
  /** The text says once that every flag may come from BURROW_<FLAG>: no note beside each flag. */
  envSaidOnce?: boolean;
}

/** The column where a flag's words start, and the one its default is lined up on. */
const TEXT_COLUMN = 26;
const DEFAULT_COLUMN = 69;
/** Where a flag's words wrap. Its default may run past it: in the column, or after the words up to SHORT_LINE. */
const WIDTH = 78;
const SHORT_LINE = 92;
/** A default longer than this ("the first free of ...") is part of the sentence instead. */
const LONGEST_DEFAULT = 31;

/** `--http-port N`, `-h, --help` */
export function flagLabel(name: string, spec: FlagSpec): string {
  return `${spec.short ? `-${spec.short}, ` : ""}--${name}${spec.arg ? ` ${spec.arg}` : ""}`;
}

/** The variables a flag is read from when it is absent, in the order they are tried. */
export function flagVariables(name: string, spec: FlagSpec): string[] {
  return [...(spec.env ? [envName(name)] : []), ...(spec.alsoEnv ?? [])];
}

/** The default as the help says it: "8080", "a random one"; undefined when there is none to say. */
export function defaultWords(spec: FlagSpec): string | undefined {
  if (spec.required) return undefined;
  return spec.defaultText ?? (spec.default === "" ? undefined : spec.default);
}

/** The groups with each flag's spec, checked: a flag of the table in no group, or a group naming no flag of it, is a bug. */
export function flagGroups(doc: CommandDoc): { title: string; flags: [string, FlagSpec][] }[] {
  const groups = doc.groups ?? [{ title: "Flags:", flags: Object.keys(doc.flags) }];
  const seen = new Set<string>();
  const out = groups.map((g) => ({
    title: g.title,
    flags: g.flags.map((name): [string, FlagSpec] => {
      const spec = doc.flags[name];
      if (!spec || seen.has(name)) throw new Error(`burrow ${doc.name}: help group '${g.title}' names --${name} ${spec ? "twice" : "which it does not take"}`);
      seen.add(name);
      return [name, spec];
    }),
  }));
  const left = Object.keys(doc.flags).filter((name) => !seen.has(name));
  if (left.length > 0) throw new Error(`burrow ${doc.name}: --${left.join(", --")} in no help group`);
  return out;
}

/** Words into lines of at most `width` characters (a longer word keeps its own line). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  if (line !== "") lines.push(line);
  return lines;
}

/** One flag's lines: its label, its words (with "repeatable" and its variables), its default lined up. */
function flagLines(name: string, spec: FlagSpec, envSaidOnce: boolean): string[] {
  const label = `  ${flagLabel(name, spec)}`;
  const vars = envSaidOnce ? (spec.alsoEnv ?? []) : flagVariables(name, spec);
  const notes = [...(spec.multiple ? ["repeatable"] : []), ...(vars.length > 0 ? [`or ${vars.join(" / ")}`] : [])];
  const words = defaultWords(spec);
  let tail = spec.required ? "required" : words === undefined ? undefined : spec.defaultText !== undefined ? `default: ${words}` : `default ${words}`;
  // a long default reads as part of the sentence; a short one goes in the column
  if (tail !== undefined && tail.length + 2 > LONGEST_DEFAULT) {
    notes.push(tail);
    tail = undefined;
  }
  const body = wrap(notes.length > 0 ? `${spec.help} (${notes.join("; ")})` : spec.help, WIDTH - TEXT_COLUMN);
  const lines: string[] = [];
  if (label.length + 1 <= TEXT_COLUMN) lines.push(label.padEnd(TEXT_COLUMN) + (body.shift() ?? ""));
  else lines.push(label);
  for (const line of body) lines.push(" ".repeat(TEXT_COLUMN) + line);
  if (tail !== undefined) {
    const last = lines[lines.length - 1]!;
    const column = `(${tail})`;
    if (last.length + 2 <= DEFAULT_COLUMN) lines[lines.length - 1] = last.padEnd(DEFAULT_COLUMN) + column;
    else if (last.length + 1 + column.length <= SHORT_LINE) lines[lines.length - 1] = `${last} ${column}`;
    else lines.push(" ".repeat(DEFAULT_COLUMN) + column);
  }
  return lines;
}

/** What `burrow <command> --help` prints. */
export function helpText(doc: CommandDoc): string {
  const [first, ...more] = doc.usage;
  const parts = [[`Usage: ${first}`, ...more.map((u) => `       ${u}`)].join("\n")];
  if (doc.about) parts.push(doc.about.trim());
  const groups = flagGroups(doc);
  groups.forEach((g, i) => {
    const lines = g.flags.flatMap(([name, spec]) => flagLines(name, spec, doc.envSaidOnce ?? false));
    if (i === groups.length - 1) lines.push(...flagLines("help", HELP_FLAG, true));
    parts.push([g.title, ...lines].join("\n"));
  });
  if (doc.after) parts.push(doc.after.trim());
  return `${parts.join("\n\n")}\n`;
}
