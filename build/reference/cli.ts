/**
 * docs/reference/cli.md: every command and flag, from the tables the
 * commands parse their flags with and print their --help from. A flag's row
 * is its table entry (default, variables, words and details); what a
 * command does beyond its flags is prose in build/reference/cli/*.md, put
 * around its tables (a `<!-- flags -->` line marks where they go).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { FlagSpec } from "../../src/config/flags.ts";
import { CONFIG_DOC, START_DOC } from "../../src/cli/agent-flags.ts";
import { CLI_KINDS } from "../../src/cli/kinds/index.ts";
import { KIND_NAMES } from "../../src/protocol/kinds.ts";
import { COMMANDS } from "../../src/cli/help.ts";
import { LOGIN_DOC } from "../../src/cli/login.ts";
import { KEYS_ADD_DOC } from "../../src/cli/keys.ts";
import { CONNECT_DOC } from "../../src/cli/connect.ts";
import { UPDATE_DOC } from "../../src/cli/update.ts";
import { DIAGNOSE_DOC } from "../../src/cli/diagnose/diagnose-flags.ts";
import { INSTALL_DOC, STATUS_DOC, UNINSTALL_DOC } from "../../src/cli/service/service-flags.ts";
import { POLICY_CHECK_DOC, POLICY_TEST_DOC } from "../../src/cli/policy-flags.ts";
import { BACKUP_DOC } from "../../src/cli/server-backup.ts";
import { DNS_CHECK_DOC } from "../../src/cli/server-dns-check-flags.ts";
import { HEALTH_DOC } from "../../src/cli/server-health.ts";
import { SERVER_DOC } from "../../src/cli/server-help.ts";
import { INIT_DOC } from "../../src/cli/server-init-flags.ts";
import { flagGroups, flagLabel, flagVariables, type CommandDoc } from "../../src/cli/usage.ts";
import { anchor, code, generatedNotice, inline, page, table } from "./markdown.ts";

const PROSE = join(import.meta.dir, "cli");

/** A section of the page: a command (its flags from its table), or prose alone under a heading. */
type Section = { doc: CommandDoc } | { heading: string; prose: string };

/** The page, in order: the server's commands, then the agent's, as the README had them. */
export const SECTIONS: readonly Section[] = [
  { doc: SERVER_DOC },
  { doc: INIT_DOC },
  { doc: BACKUP_DOC },
  { doc: DNS_CHECK_DOC },
  { doc: HEALTH_DOC },
  // burrow http, tcp, tls, udp: each kind's command, in the kind table's order
  ...KIND_NAMES.map((kind) => ({ doc: CLI_KINDS[kind].doc })),
  { heading: "Connecting: what burrow http, tcp and start share", prose: "agent-connection" },
  { heading: "The agent's screen and logs", prose: "agent-screen" },
  { doc: START_DOC },
  { doc: CONFIG_DOC },
  { doc: POLICY_CHECK_DOC },
  { doc: POLICY_TEST_DOC },
  { doc: LOGIN_DOC },
  { doc: KEYS_ADD_DOC },
  { doc: CONNECT_DOC },
  { doc: DIAGNOSE_DOC },
  { doc: INSTALL_DOC },
  { doc: UNINSTALL_DOC },
  { doc: STATUS_DOC },
  { doc: UPDATE_DOC },
  { heading: "`burrow version`", prose: "version" },
];

/** The section heading of a command. */
export const commandHeading = (name: string) => `\`burrow ${name}\``;

function prose(name: string): { before: string; after: string } {
  const path = join(PROSE, `${name}.md`);
  if (!existsSync(path)) return { before: "", after: "" };
  const [before, after = "", extra] = readFileSync(path, "utf8").split(/^<!-- flags -->$/m);
  if (extra !== undefined) throw new Error(`${path}: more than one <!-- flags --> line`);
  return { before: before!, after };
}

/** The default column: (required), a value as code, or words. */
function defaultCell(spec: FlagSpec): string {
  if (spec.required) return "(required)";
  if (spec.defaultText !== undefined) return inline(spec.defaultText);
  return spec.default ? code(spec.default) : "";
}

function meaningCell(spec: FlagSpec): string {
  const sentence = `${inline(spec.help)}${spec.multiple ? " (repeatable)" : ""}.`;
  return spec.details ? `${sentence} ${spec.details}` : sentence;
}

function flagTable(doc: CommandDoc): string {
  return flagGroups(doc)
    .map((group, i) => {
      const rows = group.flags.map(([name, spec]) => [
        code(flagLabel(name, spec)),
        defaultCell(spec),
        flagVariables(name, spec).map(code).join(", "),
        meaningCell(spec),
      ]);
      const title = i === 0 && group.title === "Flags:" ? undefined : `**${inline(group.title.replace(/:$/, ""))}**`;
      return page([title, table(["flag", "default", "environment", "meaning"], rows)]);
    })
    .join("\n");
}

function commandSection(doc: CommandDoc): string {
  const { before, after } = prose(doc.name.replaceAll(" ", "-"));
  return page([`## ${commandHeading(doc.name)}`, ["```", ...doc.usage, "```"].join("\n"), before, flagTable(doc), after]);
}

/** The commands at a glance, each linked to its section. */
function commandList(): string {
  const rows = COMMANDS.map((c) => {
    const synopsis = code(`burrow ${c.synopsis}`);
    return [c.name === undefined ? synopsis : `[${synopsis}](#${anchor(commandHeading(c.name))})`, inline(c.summary)];
  });
  return table(["command", "what it does"], rows);
}

export function cliReference(): string {
  const intro = prose("intro");
  return page([
    generatedNotice("the commands' flag tables in `src/` (`build/reference/cli.ts`)"),
    "# Command line",
    commandList(),
    intro.before,
    ...SECTIONS.map((s) => ("doc" in s ? commandSection(s.doc) : page([`## ${s.heading}`, prose(s.prose).before]))),
  ]);
}
