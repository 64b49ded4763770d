/** `burrow login --server URL --token T`: saves both for later `burrow http` / `burrow tcp`. */
import { normaliseServerUrl, saveConfig } from "../agent/settings/server-and-token.ts";
import { parseFlags } from "../config/flags.ts";
import { LOGIN_HELP } from "./help.ts";
import { UsageError } from "../usage-error.ts";

export async function loginCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { server: { type: "string" }, token: { type: "string" } });
  if (values.help) {
    process.stdout.write(LOGIN_HELP);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const server = values.server as string | undefined;
  const token = values.token as string | undefined;
  if (!server || !token) throw new UsageError("burrow login needs both --server URL and --token T");
  if (!token.startsWith("brw_")) throw new UsageError("--token: a burrow token starts with brw_");
  const path = saveConfig({ server: normaliseServerUrl(server), token });
  console.log(`Saved server ${normaliseServerUrl(server)} and token to ${path}`);
  return 0;
}
