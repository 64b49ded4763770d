/**
 * `burrow service install | uninstall | status`: the agent as a service of
 * the machine's service manager (service-plan.ts decides what is written,
 * service-files.ts writes it, service-manager.ts tells the manager).
 */
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { parseFlags } from "../../config/flags.ts";
import { UsageError } from "../../usage-error.ts";
import { helpText, type CommandDoc } from "../usage.ts";
import { INSTALL_DOC, STATUS_DOC, UNINSTALL_DOC } from "./service-flags.ts";
import { removeFile, standing, writeFailure, writeWhole } from "./service-files.ts";
import { forgetSteps, runSteps, startSteps, stepLine, stopSteps } from "./service-manager.ts";
import { underRoot } from "./service-paths.ts";
import { planInstall, serviceTarget } from "./service-plan.ts";
import { serviceStatus } from "./service-status.ts";

/** What --print shows instead of the token. */
const MASKED_TOKEN = "<the token>";

const SUBCOMMANDS = "burrow service install | uninstall | status";

export async function serviceCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    process.stdout.write(`Usage: ${SUBCOMMANDS}\n\n${[INSTALL_DOC, UNINSTALL_DOC, STATUS_DOC].map((d) => `  burrow ${d.usage[0]!.slice("burrow ".length)}`).join("\n")}\n\nburrow service <command> --help for its flags.\n`);
    return sub === undefined ? 2 : 0;
  }
  const run = { install, uninstall, status }[sub];
  const doc = { install: INSTALL_DOC, uninstall: UNINSTALL_DOC, status: STATUS_DOC }[sub];
  if (!run || !doc) throw new UsageError(`unknown service command '${sub.slice(0, 40)}' (${SUBCOMMANDS})`);
  return run(rest, doc);
}

function flags(argv: string[], doc: CommandDoc): Record<string, string | boolean | string[] | undefined> | undefined {
  const { values, positionals } = parseFlags(argv, doc.flags);
  if (values.help) return void process.stdout.write(helpText(doc)), undefined;
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]!.slice(0, 80)}'`);
  return values;
}

async function install(argv: string[], doc: CommandDoc): Promise<number> {
  const values = flags(argv, doc);
  if (!values) return 0;
  const plan = planInstall(values);
  const { target, text } = plan;
  const { paths } = target;
  if (values.print) {
    const out = [`# ${paths.service}`, text, `# ${paths.token} (mode 0600)`, MASKED_TOKEN, "", ...plan.notes.map((n) => `# ${n}`)];
    process.stdout.write(out.join("\n").replace(/\n*$/, "\n"));
    return 0;
  }
  const serviceFile = underRoot(target.root, paths.service);
  const tokenFile = underRoot(target.root, paths.token);
  const now = standing(serviceFile);
  if (now.kind === "foreign") {
    console.error(`burrow: ${serviceFile} exists and ${now.why}: it is left as it is (remove it yourself, or install under another --name)`);
    return 1;
  }
  // the token first: a service file that names a token file not yet written would fail its first start
  for (const [what, path, body, mode, dirMode] of [
    // a user's folder is theirs alone; a system one (/etc/burrow) must let the service reach its config file
    ["token file", tokenFile, `${plan.token}\n`, 0o600, target.user ? 0o700 : 0o755],
    ["service file", serviceFile, text, 0o644, 0o755],
  ] as const) {
    try {
      writeWhole(path, body, mode, dirMode);
    } catch (err) {
      console.error(`burrow: ${writeFailure(what, path, err)}`);
      return 1;
    }
  }
  if (paths.log !== undefined && target.platform === "macos") {
    // launchd opens the log file, but makes no folder for it; without one, only the log is lost
    try {
      mkdirSync(dirname(underRoot(target.root, paths.log)), { recursive: true, mode: 0o755 });
    } catch {}
  }
  const report = [`${now.kind === "ours" ? "Replaced" : "Wrote"} ${serviceFile}`, `Wrote ${tokenFile} (mode 0600)`];
  if ("config" in plan.spec.tunnels) report.push(`The service runs the tunnels of ${plan.spec.tunnels.config}; it reads the file at each start.`);
  else report.push("The service runs burrow start --remote: the tunnels the server holds for its token.");
  let steps = startSteps(target);
  if (target.live && !values["no-start"]) {
    // on Windows, WinSW's steps wait until the person has put WinSW there (said below)
    const runnable = steps.filter((s) => target.platform !== "windows" || s.cmd[0] === "icacls" || existsSync(s.cmd[0]!));
    const failed = runSteps(runnable);
    if (failed) {
      console.error(`burrow: ${failed}`);
      process.stdout.write(`${report.join("\n")}\n`);
      return 1;
    }
    steps = steps.filter((s) => !runnable.includes(s));
    if (steps.length === 0) report.push(`Started ${paths.unitName}; burrow service status${target.user ? " --user" : ""} says how it is.`);
  }
  if (steps.length > 0) {
    report.push("", "To start it now and at each boot:");
    // Windows runs burrow through WinSW (winsw-xml.ts), which the person brings
    if (target.platform === "windows") report.push(`  (first, WinSW's executable beside ${paths.service}, named ${target.name}.exe: github.com/winsw/winsw)`);
    report.push(...steps.map((s) => `  ${stepLine(s, target.platform)}`));
  }
  if (plan.notes.length > 0) report.push("", ...plan.notes);
  process.stdout.write(`${report.join("\n")}\n`);
  return 0;
}

async function uninstall(argv: string[], doc: CommandDoc): Promise<number> {
  const values = flags(argv, doc);
  if (!values) return 0;
  const target = serviceTarget(values);
  const serviceFile = underRoot(target.root, target.paths.service);
  const tokenFile = underRoot(target.root, target.paths.token);
  const now = standing(serviceFile);
  if (now.kind === "foreign") {
    console.error(`burrow: ${serviceFile} exists and ${now.why}: it is left as it is`);
    return 1;
  }
  if (now.kind === "absent") {
    // a token file left behind by an install that stopped half-way is still ours to take away
    if (removeFile(tokenFile)) return void process.stdout.write(`Removed ${tokenFile} (its service file was gone already)\n`), 0;
    console.error(`burrow: no service ${target.paths.unitName} installed (no ${serviceFile})`);
    return 3;
  }
  const report: string[] = [];
  if (target.live) {
    const failed = runSteps(stopSteps(target));
    if (failed) console.error(`burrow: ${failed}`);
  } else {
    report.push("On its machine, if it runs there, stop it too:", ...stopSteps(target).map((s) => `  ${stepLine(s, target.platform)}`));
  }
  removeFile(serviceFile);
  report.push(`Removed ${serviceFile}`);
  if (removeFile(tokenFile)) report.push(`Removed ${tokenFile}`);
  if (target.live) runSteps(forgetSteps(target));
  process.stdout.write(`${report.join("\n")}\n`);
  return 0;
}

async function status(argv: string[], doc: CommandDoc): Promise<number> {
  const values = flags(argv, doc);
  if (!values) return 0;
  return serviceStatus(serviceTarget(values));
}
