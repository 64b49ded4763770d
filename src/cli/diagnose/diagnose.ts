/**
 * `burrow diagnose`: the settings found as `burrow start` finds them, the
 * checks run (run-checks.ts), the report printed (or its JSON), and with
 * --bundle the file for a support request.
 */
import { parseFlags } from "../../config/flags.ts";
import { resolveCredentials, resolveProxy } from "../../agent/settings/server-and-token.ts";
import { findConfigFile, readTunnelsFile, type TunnelsFile } from "../../agent/settings/tunnels-file.ts";
import { UsageError } from "../../usage-error.ts";
import { helpText } from "../usage.ts";
import type { DiagnoseSettings } from "./checks.ts";
import { BOUNDS, DEFAULTS, DIAGNOSE_DOC } from "./diagnose-flags.ts";
import { bundleText, recentLog, writeBundle } from "./bundle.ts";
import { report, reportText } from "./report.ts";
import { runChecks } from "./run-checks.ts";

type Env = Record<string, string | undefined>;

/** A whole number flag within its bounds, or the usage error naming it. */
function whole(values: Record<string, unknown>, flag: string, fallback: number, [min, max]: readonly [number, number]): number {
  const text = values[flag] as string | undefined;
  if (text === undefined) return fallback;
  const n = /^[0-9]{1,6}$/.test(text) ? Number(text) : NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`--${flag} must be a whole number from ${min} to ${max} (got '${text.slice(0, 40)}')`);
  return n;
}

/** Where the agent's proxy comes from, as the agent takes it: --proxy, the config file's proxy:, then the environment. */
function proxyOf(flag: string | undefined, file: TunnelsFile | undefined, env: Env): DiagnoseSettings["proxy"] {
  const given = flag || file?.proxy;
  const url = resolveProxy(given, env);
  if (url === undefined) return undefined;
  const from = flag ? "--proxy" : file?.proxy ? `${file.path}'s proxy:` : ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"].find((n) => env[n]) ?? "the environment";
  return { url, from };
}

export async function diagnoseCommand(argv: string[], env: Env = process.env): Promise<number> {
  const { values, positionals } = parseFlags(argv, DIAGNOSE_DOC.flags, env);
  if (values.help) return void process.stdout.write(helpText(DIAGNOSE_DOC)), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]!.slice(0, 80)}'`);
  const timeoutS = whole(values, "timeout", DEFAULTS.timeoutS, BOUNDS.timeoutS);
  const clockToleranceS = whole(values, "clock-tolerance", DEFAULTS.clockToleranceS, BOUNDS.clockToleranceS);
  const logLines = whole(values, "log-lines", DEFAULTS.logLines, BOUNDS.logLines);

  // a config file is optional here: without one, everything but the tunnels is checked
  const remote = values.remote === true;
  const named = values.config as string | undefined;
  // --remote reads a file only when one is named, as burrow start --remote does
  const configPath = remote && named === undefined ? undefined : findConfigFile(named, env);
  const file = configPath ? readTunnelsFile(configPath) : undefined;
  const { server, token } = resolveCredentials(
    { server: values.server as string | undefined, token: values.token as string | undefined, tokenFile: values["token-file"] as string | undefined },
    env,
    { server: file?.server, token: file?.token },
  );
  const settings: DiagnoseSettings = {
    server,
    token,
    proxy: proxyOf(values.proxy as string | undefined, file, env),
    insecure: values.insecure === true || file?.insecure === true,
    tunnels: (file?.tunnels ?? []).map((t) => ({ name: t.name, request: t.request })),
    remote,
    configPath,
    timeoutMs: timeoutS * 1000,
    clockToleranceS,
  };

  const results = await runChecks(settings);
  const r = report(server, results);
  process.stdout.write(values.json ? `${JSON.stringify(r, null, 2)}\n` : reportText(r));
  const bundle = values.bundle as string | undefined;
  if (bundle !== undefined) {
    const service = values.service as string;
    let log;
    try {
      log = recentLog({ logFile: values["log-file"] as string | undefined, service, lines: logLines });
    } catch (err) {
      throw new UsageError(`--log-file: cannot read ${values["log-file"]} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
    }
    try {
      writeBundle(bundle, bundleText(r, { configPath, log, logLines, service }));
    } catch (err) {
      console.error(`burrow: cannot write the bundle ${bundle}: ${(err as Error).message}`);
      return 1;
    }
    // on stderr: --json's standard output stays one JSON object
    console.error(`Wrote ${bundle} (mode 0600): the report${configPath ? ", the config file" : ""} and ${log ? `the last ${log.lines.length} lines of ${log.source}` : "no log (none found: --log-file FILE)"}, secrets masked.`);
  }
  return r.ok ? 0 : 1;
}
