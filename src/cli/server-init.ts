/**
 * `burrow server init`: writes the systemd unit and the environment file
 * holding the first admin's password, then says what else the machine needs
 * (DNS records, open ports, the commands to start it). `--print` shows the
 * files instead and writes nothing.
 */
import { existsSync, mkdirSync, statSync, writeFileSync, chmodSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { dirname } from "node:path";
import { guessPublicAddresses } from "../dns/public-address.ts";
import { FROM_SOURCE_BINARY, INIT_DOC, parseServerInit, type InitOptions } from "./server-init-flags.ts";
import { executableProblem, MASKED_PASSWORD, renderEnvFile, renderUnit } from "./systemd-unit.ts";
import { DEFAULT_ADMIN_USERNAME } from "../core/bootstrap.ts";
import { directPortAllowed } from "../edge/direct.ts";
import { randomBase62 } from "../core/secrets.ts";
import { helpText } from "./usage.ts";
import { dnsSection, firewallSection, nextSteps, passwordSection, shellWord, type AddressSource } from "./server-init-report.ts";
import { isCompiled } from "../version.ts";

/** As long as the password the server generates itself when none is given. */
const PASSWORD_LENGTH = 24;

/** A compiled burrow runs its code from Bun's embedded file system; from source, Bun runs a .ts file. */

export async function serverInitCommand(argv: string[]): Promise<number> {
  const parsed = parseServerInit(argv);
  if (parsed.help) {
    process.stdout.write(helpText(INIT_DOC));
    return 0;
  }
  const o = parsed.options;
  const notes: string[] = [];

  let binary = o.binary;
  if (binary === undefined && isCompiled()) binary = process.execPath;
  if (binary === undefined) {
    binary = FROM_SOURCE_BINARY;
    notes.push(`Run from source: ExecStart uses ${binary}. Put the compiled burrow there (npm run build writes dist/burrow), or name it with --binary PATH.`);
  }
  const problem = executableProblem(binary);
  if (problem) {
    console.error(`burrow: this executable's path ${problem}: '${binary}'; give another with --binary PATH`);
    return 1;
  }
  if (!existsSync(binary)) notes.push(`${binary} does not exist yet: the service cannot start until it does.`);

  const source: AddressSource = o.publicIps ? "given" : "guessed";
  const addresses = o.publicIps ?? guessPublicAddresses(networkInterfaces());
  const unit = renderUnit({
    domain: o.config.domain,
    binary,
    serverArgs: o.serverArgs,
    stateDirectory: o.stateDirectory,
    tls: o.tls,
    envFile: o.envFile,
    ports: [
      o.config.httpPort,
      o.config.adminPort,
      directPortAllowed(o.config) ? (o.config.agentPort ?? 0) : 0,
      o.config.tcpPorts.first,
      o.config.acme?.httpsPort ?? 0,
      o.config.acme?.dnsPort ?? 0,
    ],
    drainTimeoutS: o.config.drainTimeoutMs / 1000,
  });
  const envExists = existsSync(o.envFile);

  if (o.print) {
    const out = [`# ${o.unitFile}`, unit, `# ${o.envFile} (mode 0600)${envExists ? ": exists, and init keeps it as it is" : ""}`, renderEnvFile(MASKED_PASSWORD)];
    out.push(...dnsSection(o.config.domain, addresses, source, o.config.acme), "", ...notes);
    process.stdout.write(out.join("\n").replace(/\n*$/, "\n"));
    return 0;
  }
  if (existsSync(o.unitFile) && !o.force) {
    console.error(`burrow: ${o.unitFile} exists; --force replaces it (--print shows what it would become)`);
    return 1;
  }

  const written = writeFiles(o, unit, envExists);
  if (!written.ok) {
    console.error(`burrow: ${written.error}`);
    return 1;
  }
  const report: string[] = [`Wrote ${o.unitFile}`];
  if (written.password) {
    report.push(`Wrote ${o.envFile} (mode 0600)`, "", ...passwordSection(DEFAULT_ADMIN_USERNAME, written.password, o.envFile));
  } else {
    report.push(`Kept ${o.envFile}: it exists, so no password was generated (the server uses its BURROW_ADMIN_PASSWORD, or prints one in its log)`);
    const mode = statSync(o.envFile).mode & 0o777;
    if (mode & 0o077) report.push(`  It is readable by others (mode ${mode.toString(8).padStart(4, "0")}): chmod 600 ${shellWord(o.envFile)}`);
  }
  report.push("", ...dnsSection(o.config.domain, addresses, source, o.config.acme), "", ...firewallSection(o.config), "", ...nextSteps(o.unitFile));
  if (notes.length > 0) report.push("", ...notes);
  process.stdout.write(report.join("\n") + "\n");
  return 0;
}

type Written = { ok: true; password?: string } | { ok: false; error: string };

/**
 * The unit first: if it cannot be written (not root, say), no password has
 * been made that nobody saw. The environment file is never replaced: the
 * password in it may be the one the admin was created with.
 */
function writeFiles(o: InitOptions, unit: string, envExists: boolean): Written {
  const step = (what: string, path: string, write: () => void): string | undefined => {
    try {
      write();
      return undefined;
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      const hint = e.code === "EACCES" || e.code === "EPERM" ? ": permission denied (run it as root, or choose the path with --unit-file / --env-file)" : `: ${e.message}`;
      return `cannot write the ${what} ${path}${hint}`;
    }
  };
  const unitError = step("unit", o.unitFile, () => {
    mkdirSync(dirname(o.unitFile), { recursive: true, mode: 0o755 });
    writeFileSync(o.unitFile, unit, { mode: 0o644, flag: o.force ? "w" : "wx" });
  });
  if (unitError) return { ok: false, error: unitError };
  if (envExists) return { ok: true };

  const password = randomBase62(PASSWORD_LENGTH);
  const envError = step("environment file", o.envFile, () => {
    mkdirSync(dirname(o.envFile), { recursive: true, mode: 0o700 });
    // wx: created here, never an existing file followed or replaced; 0600 from the first byte
    writeFileSync(o.envFile, renderEnvFile(password), { mode: 0o600, flag: "wx" });
    chmodSync(o.envFile, 0o600);
  });
  if (envError) return { ok: false, error: `${envError}; ${o.unitFile} was written: run again with --force once this is fixed` };
  return { ok: true, password };
}
