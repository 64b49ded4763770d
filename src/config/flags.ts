/**
 * Flag parsing on top of node:util's parseArgs, with short messages. Every
 * flag of a command may also come from the environment as BURROW_<FLAG>
 * (--http-port -> BURROW_HTTP_PORT); a flag on the command line wins.
 */
import { parseArgs } from "node:util";
import { UsageError } from "../usage-error.ts";

export interface FlagSpec {
  type: "string" | "boolean";
  /** Read BURROW_<NAME> when the flag is absent. */
  env?: boolean;
  /** May be given more than once: the value is then the list of them all. */
  multiple?: boolean;
}

export interface ParsedFlags {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

export const envName = (flag: string) => `BURROW_${flag.toUpperCase().replaceAll("-", "_")}`;

export function parseFlags(
  argv: string[],
  spec: Record<string, FlagSpec>,
  env: Record<string, string | undefined> = process.env,
): ParsedFlags {
  const options = Object.fromEntries(Object.entries(spec).map(([name, s]) => [name, { type: s.type, multiple: s.multiple ?? false }]));
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...options, help: { type: "boolean", short: "h" } }, allowPositionals: true, strict: true });
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
