/**
 * `burrow update`: replaces this executable with a newer signed release
 * (src/update/ does the steps); `--check` only says whether there is one;
 * `--rollback` puts back the executable the last update replaced.
 */
import { realpathSync } from "node:fs";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { UpdateError } from "../update/errors.ts";
import { packagedBy, servicesRunning } from "../update/installed.ts";
import { probeExecutable } from "../update/probe.ts";
import { releaseKey } from "../update/release-key.ts";
import { previousPath, swapWithPrevious, whileLocked } from "../update/replace.ts";
import { RELEASES_URL, releaseSource, STALL_TIMEOUT_MS } from "../update/source.ts";
import { findBuild, update, type Running } from "../update/update.ts";
import { isVersion } from "../update/versions.ts";
import { UsageError } from "../usage-error.ts";
import { BUILD, isCompiled, VERSION } from "../version.ts";
import { helpText, type CommandDoc } from "./usage.ts";

/** --check's answer for scripts, as `dnf check-update` gives it: 100 when there is a newer release. */
export const EXIT_NEWER = 100;

const UPDATE_FLAGS = {
  version: { type: "string", arg: "V", help: "install this version (e.g. 0.3.0), older ones too; default: the newest release" },
  check: { type: "boolean", help: "only say whether a newer release exists: exit 100 when one does, 0 when not, 1 on an error" },
  from: {
    type: "string",
    arg: "URL|DIR",
    help: "the release to take: the URL of a folder holding its SHA256SUMS, or a directory here",
    defaultText: "the project's latest release",
    details: `Default: \`${RELEASES_URL}/latest/download\`, or \`${RELEASES_URL}/download/v<V>\` with \`--version V\`. A mirror holds one release's files as \`npm run release\` writes them (SHA256SUMS, SHA256SUMS.minisig and the executables); its signature must still verify with the key built into this executable.`,
  },
  rollback: { type: "boolean", help: "put back the executable the last update replaced (kept as burrow.old)" },
  timeout: {
    type: "string",
    arg: "S",
    default: String(STALL_TIMEOUT_MS / 1000),
    help: "seconds a download may go without a byte before it is given up, 1 to 3600",
    details: "A slow download goes on as long as bytes keep coming; a stalled one ends with `CUT_SHORT` and changes nothing. The files are capped too: SHA256SUMS at 1 MiB, its signature at 16 KiB, an executable at 1 GiB.",
  },
} as const satisfies FlagTable;

export const UPDATE_DOC: CommandDoc = {
  name: "update",
  usage: ["burrow update [--version V] [--from URL|DIR]", "burrow update --check [--from URL|DIR]", "burrow update --rollback"],
  about: `Downloads this platform's executable of the newest release (or --version's),
checks SHA256SUMS's signature with the key built into this executable and the
download against SHA256SUMS, runs it once to see that it starts here, then puts
it in this executable's place in one rename. The one replaced is kept beside it
as burrow.old. A downgrade is refused unless --version names it. A server that
runs as a service keeps running the old version until you restart it: burrow
update prints the command and never restarts anything itself.`,
  flags: UPDATE_FLAGS,
  after: `Exit codes: 0 done (or nothing to do); 1 refused or failed, the executable
unchanged; 2 a mistake on the command line; --check: 100 a newer release exists.`,
};

export async function updateCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, UPDATE_FLAGS);
  if (values.help) {
    process.stdout.write(helpText(UPDATE_DOC));
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}' (burrow update --version V names a version)`);
  const version = (values.version as string | undefined)?.replace(/^v/, "");
  if (version !== undefined && !isVersion(version)) throw new UsageError(`--version ${values.version} is not a version (e.g. 0.3.0)`);
  const from = values.from as string | undefined;
  if (values.rollback && (version !== undefined || from !== undefined || values.check || values.timeout !== undefined)) throw new UsageError("--rollback takes no other flag");
  const timeout = (values.timeout as string | undefined) ?? UPDATE_FLAGS.timeout.default;
  if (!/^[0-9]{1,4}$/.test(timeout) || Number(timeout) < 1 || Number(timeout) > 3600) throw new UsageError("--timeout must be a number of seconds from 1 to 3600");
  const stallMs = Number(timeout) * 1000;
  try {
    return values.rollback ? await rollback() : values.check ? await check(from, version, stallMs) : await install(from, version, stallMs);
  } catch (err) {
    if (err instanceof UpdateError) {
      console.error(`burrow update: ${err.message} [${err.code}]`);
      return 1;
    }
    throw err;
  }
}

/** This executable, as an update sees it; refused when there is none to replace or no key to check with. */
function running(needKey: boolean): Running {
  if (!isCompiled()) throw new UpdateError("NOT_COMPILED", `this burrow runs from source (${process.execPath} ${Bun.main}): there is no burrow executable to update; pull the source instead`);
  const key = releaseKey();
  if (!key && needKey) {
    throw new UpdateError("NO_RELEASE_KEY", "this executable was built without the release's public key (an unsigned build), so it cannot check a release's signature; install a signed release by hand (docs/install.md)");
  }
  return { exe: realpathSync(process.execPath), version: VERSION, target: BUILD.target, key: key! };
}

async function check(from: string | undefined, version: string | undefined, stallMs: number): Promise<number> {
  const me = running(true);
  const source = releaseSource(from, { version, stallMs });
  const { build, order } = await findBuild(source, me, version);
  if (order > 0) {
    console.log(`burrow ${build.version} is out (this is ${me.version}): burrow update${from !== undefined ? ` --from ${from}` : ""} installs it`);
    return EXIT_NEWER;
  }
  console.log(order === 0 ? `burrow ${me.version} is the newest release: nothing to update` : `this burrow ${me.version} is newer than the release at ${source.where} (${build.version})`);
  return 0;
}

async function install(from: string | undefined, version: string | undefined, stallMs: number): Promise<number> {
  const me = running(true);
  const owner = packagedBy(me.exe);
  if (owner) {
    const how = owner === "dpkg" ? "sudo apt install ./burrow_<version>_<arch>.deb" : "sudo dnf install ./burrow-<version>-1.<arch>.rpm";
    throw new UpdateError("NOT_WRITABLE", `${me.exe} belongs to the burrow ${owner === "dpkg" ? "Debian" : "RPM"} package: upgrade it with the package manager (${how}), or its record of the file would be wrong`);
  }
  const source = releaseSource(from, { version, stallMs });
  console.log(`Looking at ${source.where} ...`);
  const outcome = await update(source, me, version);
  if (outcome.kind === "same") {
    console.log(`burrow ${outcome.version} is installed already (${me.exe}): nothing to do`);
    return 0;
  }
  console.log(`burrow ${outcome.from} → ${outcome.to}  (${me.exe}; the one before is kept as ${outcome.previous}: burrow update --rollback puts it back)`);
  restartAdvice(me.exe);
  return 0;
}

async function rollback(): Promise<number> {
  const me = running(false);
  const previous = previousPath(me.exe);
  let back: string;
  try {
    back = (await probeExecutable(previous)).version;
  } catch (err) {
    // missing: said below by swapWithPrevious; present but not runnable: not put back
    if (err instanceof UpdateError && (await Bun.file(previous).exists())) throw new UpdateError("DOES_NOT_RUN", `${previous} does not run here, so it is not put back: ${err.message}`);
    back = "?";
  }
  await whileLocked(me.exe, async () => swapWithPrevious(me.exe));
  console.log(`burrow ${me.version} → ${back}  (${me.exe}, rolled back; ${me.version} is kept as ${previous}: burrow update --rollback again undoes this)`);
  restartAdvice(me.exe);
  return 0;
}

/** A server started from this executable keeps the old code until restarted, by its admin, when they choose. */
function restartAdvice(exe: string): void {
  const services = servicesRunning([exe]); // a unit that names a link to it is found too
  if (services.length > 0) {
    for (const service of services) console.log(`The service ${service} runs this executable: restart it when it suits you, with  sudo systemctl restart ${service}`);
  } else {
    console.log("A burrow server or agent already running goes on with the old version until it is restarted.");
  }
}
