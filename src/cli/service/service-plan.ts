/**
 * What `burrow service install` will write, decided before anything is:
 * the flags checked, the config file read, server and token found as
 * `burrow start` finds them, and each platform's file made from one spec.
 * install (service-install.ts) then writes it, or --print shows it.
 */
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { resolveCredentials, resolveProxy } from "../../agent/settings/server-and-token.ts";
import { configFileCandidates, findConfigFile, readTunnelsFile } from "../../agent/settings/tunnels-file.ts";
import { hidePassword } from "../../log-redact.ts";
import { UsageError } from "../../usage-error.ts";
import { isCompiled } from "../../version.ts";
import { executableProblem } from "../systemd-unit.ts";
import { SERVICE_NAME, SERVICE_PLATFORMS, thisPlatform, type AgentServiceSpec, type ServicePlatform } from "./agent-service.ts";
import { renderPlist } from "./launchd-plist.ts";
import { defaultBinary, inHomeDirectory, servicePaths, type ServicePaths } from "./service-paths.ts";
import { RESTART_STEPS_SINCE, renderAgentUnit, systemdVersion } from "./systemd-agent-unit.ts";
import { renderWinswXml, windowsWordProblem } from "./winsw-xml.ts";

type Values = Record<string, string | boolean | string[] | undefined>;
type Env = Record<string, string | undefined>;

/** Which service the flags name: every subcommand's. */
export interface ServiceTarget {
  platform: ServicePlatform;
  user: boolean;
  name: string;
  root?: string;
  paths: ServicePaths;
  /** The platform is this machine's, its service manager runs, and no --root: it may be asked. */
  live: boolean;
}

export function serviceTarget(values: Values, env: Env = process.env): ServiceTarget {
  const given = values.platform as string | undefined;
  const own = thisPlatform();
  if (given !== undefined && !SERVICE_PLATFORMS.includes(given as ServicePlatform)) {
    throw new UsageError(`--platform must be ${SERVICE_PLATFORMS.join(", ")} (got '${given.slice(0, 40)}')`);
  }
  const platform = (given as ServicePlatform | undefined) ?? own;
  if (!platform) throw new UsageError(`no service manager burrow knows on ${process.platform}: pass --platform ${SERVICE_PLATFORMS.join("|")} with --print or --root`);
  const user = values.user === true;
  if (user && platform === "windows") throw new UsageError("a Windows service is the system's: no --user (run burrow start at sign-in instead)");
  const name = (values.name as string | undefined) ?? "burrow-agent";
  if (!SERVICE_NAME.test(name)) throw new UsageError(`--name must be 1-63 characters from a-z, 0-9 and single hyphens between them (got '${name.slice(0, 70)}')`);
  const rootFlag = values.root as string | undefined;
  const root = rootFlag === undefined || rootFlag === "" ? undefined : resolve(rootFlag);
  // systemd installed but not running (a container, a chroot): the files are written, the commands said
  const managed = platform !== "linux" || existsSync("/run/systemd/system");
  return { platform, user, name, root, paths: servicePaths({ platform, user, name, env }), live: root === undefined && platform === own && managed };
}

export interface InstallPlan {
  target: ServiceTarget;
  spec: AgentServiceSpec;
  /** The service file's text. */
  text: string;
  token: string;
  /** Where the server and token came from, for the report. */
  notes: string[];
}

/** Reads and checks everything install needs; throws UsageError with the first mistake. */
export function planInstall(values: Values, env: Env = process.env, cwd = process.cwd()): InstallPlan {
  const target = serviceTarget(values, env);
  const { platform, user, paths } = target;
  const notes: string[] = [];
  const remote = values.remote === true;
  const configFlag = values.config as string | undefined;
  if (remote && configFlag !== undefined) throw new UsageError("--config and --remote both say where the tunnels come from: keep one");

  let file: ReturnType<typeof readTunnelsFile> | undefined;
  if (!remote) {
    const unreachable = (path: string) =>
      new UsageError(`${path} is in a home directory, which a system service cannot read (its sandbox's ProtectHome=yes): copy it to /etc/burrow/, or install with --user`);
    const sandboxed = platform === "linux" && !user;
    if (sandboxed && configFlag !== undefined && inHomeDirectory(resolve(cwd, configFlag))) throw unreachable(resolve(cwd, configFlag));
    const path = findConfigFile(configFlag, env, cwd);
    if (!path) throw new UsageError(`no config file: looked for ${configFileCandidates(env, cwd).join(" and ")} (pass --config FILE, or --remote)`);
    if (sandboxed && inHomeDirectory(path)) throw unreachable(path);
    file = readTunnelsFile(path);
  }

  const { server, token } = resolveCredentials(
    { server: values.server as string | undefined, token: values.token as string | undefined, tokenFile: values["token-file"] as string | undefined },
    env,
    { server: file?.server, token: file?.token },
  );
  // the file's server: the agent reads itself; one from a flag, the environment or burrow login's file goes into the command line
  const fileServer = file?.server !== undefined && !values.server && !env.BURROW_SERVER;
  const proxy = file?.proxy !== undefined && !values.proxy ? undefined : resolveProxy(values.proxy as string | undefined, env);
  if (proxy !== undefined && new URL(proxy).password !== "") {
    throw new UsageError(`the proxy ${hidePassword(proxy)} has a password, which the service file (readable by all) would show: use a proxy without one, or give it in the config file's proxy:`);
  }

  const binaryFlag = values.binary as string | undefined;
  let binary = binaryFlag ?? (isCompiled() ? process.execPath : defaultBinary(platform));
  if (binaryFlag === undefined && !isCompiled()) notes.push(`Run from source: the service runs ${binary}. Put the compiled burrow there, or name it with --binary PATH.`);
  if (platform !== "windows") {
    binary = isAbsolute(binary) ? binary : resolve(cwd, binary);
    const problem = executableProblem(binary);
    if (problem) throw new UsageError(`--binary ${problem} (got '${binary}')`);
  }

  const spec: AgentServiceSpec = {
    name: target.name,
    binary,
    tunnels: file ? { config: file.path } : { remote: true },
    server: fileServer ? undefined : server,
    tokenFile: paths.token,
    proxy,
    insecure: values.insecure === true || undefined,
  };
  if (platform === "windows") {
    for (const word of [binary, ...("config" in spec.tunnels ? [spec.tunnels.config] : []), spec.server ?? "", paths.token]) {
      const problem = windowsWordProblem(word);
      if (problem) throw new UsageError(`'${word}' ${problem}`);
    }
  }
  const text = serviceText(target, spec, notes);
  return { target, spec, text, token, notes };
}

/** The service file for the target's platform. */
function serviceText(target: ServiceTarget, spec: AgentServiceSpec, notes: string[]): string {
  switch (target.platform) {
    case "linux": {
      const version = systemdVersion();
      const restartSteps = version !== undefined && version >= RESTART_STEPS_SINCE;
      if (!restartSteps) notes.push(`systemd ${version ?? "(not found here)"}: restarts after a failure are every 10 s; from systemd ${RESTART_STEPS_SINCE} on, the delay grows from 1 s to 5 min.`);
      return renderAgentUnit(spec, { user: target.user, tokenSource: target.paths.token, restartSteps });
    }
    case "macos":
      return renderPlist(spec, { logFile: target.paths.log!, user: target.user });
    case "windows":
      return renderWinswXml(spec, { logDir: target.paths.log! });
  }
}
