/**
 * Flag parsing on top of node:util's parseArgs, with short messages. A flag
 * may also come from the environment as BURROW_<FLAG> (--http-port ->
 * BURROW_HTTP_PORT) when its spec says so; a flag on the command line wins.
 *
 * A command's flag table is the one place its flags are described: the
 * parser reads it, its --help is made from it (cli/usage.ts), and so is
 * docs/reference/cli.md (`npm run docs`).
 */
import { parseArgs } from "node:util";
import { UsageError } from "../usage-error.ts";

export interface FlagSpec {
  type: "string" | "boolean";
  /** A one-letter alias: -h for --help. */
  short?: string;
  /** What the value is called in help and the reference: the N of --http-port N. */
  arg?: string;
  /** The value the command takes when the flag (and its variable) is absent; the command's code reads it here. */
  default?: string;
  /** The default in words, when it is not one value or not only one ("a random one"); shown instead of `default`. */
  defaultText?: string;
  /** The command refuses to run without it (the command checks, with its own message). */
  required?: boolean;
  /** Read BURROW_<NAME> when the flag is absent. */
  env?: boolean;
  /** Variables the command itself reads when the flag is absent (BURROW_SERVER, HTTPS_PROXY): documented here, not read by parseFlags. */
  alsoEnv?: readonly string[];
  /** May be given more than once: the value is then the list of them all. */
  multiple?: boolean;
  /** What it is for, in one line of --help (plain text). */
  help: string;
  /** More for the reference page only (markdown): limits, examples, what happens past them. */
  details?: string;
}

export type FlagTable = Readonly<Record<string, FlagSpec>>;

/** Every command takes it; parseFlags adds it to each table. */
export const HELP_FLAG = { type: "boolean", short: "h", help: "this text" } as const satisfies FlagSpec;

export interface ParsedFlags {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

export const envName = (flag: string) => `BURROW_${flag.toUpperCase().replaceAll("-", "_")}`;

export function parseFlags(
  argv: string[],
  spec: FlagTable,
  env: Record<string, string | undefined> = process.env,
): ParsedFlags {
  const options = Object.fromEntries(
    Object.entries(spec).map(([name, s]) => [name, { type: s.type, multiple: s.multiple ?? false, ...(s.short ? { short: s.short } : {}) }]),
  );
  let parsed;
  try {
    parsed = parseArgs({ args: switchesWrittenAlone(argv, spec), options: { ...options, help: { type: HELP_FLAG.type, short: HELP_FLAG.short } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(shortMessage(err));
  }
  const values: ParsedFlags["values"] = { ...parsed.values };
  for (const [name, s] of Object.entries(spec)) {
    if (values[name] !== undefined || !s.env) continue;
    const fromEnv = env[envName(name)];
    if (fromEnv === undefined || fromEnv === "") continue;
    values[name] = s.type === "boolean" ? ["1", "true", "yes"].includes(fromEnv.toLowerCase()) : s.multiple ? [fromEnv] : fromEnv;
  }
  return { values, positionals: parsed.positionals };
}

function shortMessage(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const flag = /'(-{1,2}[^' ]+)/.exec(e.message ?? "")?.[1];
  switch (e.code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return `unknown flag ${flag ?? ""}`.trim();
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      return flag ? `flag ${flag} needs a value` : "a flag is missing its value";
    default:
      return e.message ?? String(err);
  }
}

/** A switch: a flag taking on or off, as its help starts by saying ("on, or off: ..."). */
function isSwitch(s: FlagSpec | undefined): boolean {
  return s?.type === "string" && s.arg === "M" && /^(on|off), or (on|off):/.test(s.help);
}

/**
 * A switch written alone, with no value after it (the last word, or another
 * flag next), means on: `--webhook-allow-private` is
 * `--webhook-allow-private on`, as a reader of the docs would write it.
 * Nothing after `--` is a flag.
 */
function switchesWrittenAlone(argv: string[], spec: FlagTable): string[] {
  const end = argv.indexOf("--");
  return argv.map((word, i) => {
    if ((end !== -1 && i >= end) || !word.startsWith("--") || word.includes("=")) return word;
    const next = argv[i + 1];
    return isSwitch(spec[word.slice(2)]) && (next === undefined || next.startsWith("-")) ? `${word}=on` : word;
  });
}
