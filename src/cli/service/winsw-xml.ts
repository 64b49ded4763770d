/**
 * The agent as a Windows service. Windows starts only programs that speak
 * its service control protocol, which burrow does not; WinSW
 * (github.com/winsw/winsw, MIT) does, and runs burrow under it from an XML
 * file of this shape: the file is named as the service, beside WinSW's
 * executable renamed the same (burrow-agent.exe, burrow-agent.xml), and
 * `burrow-agent.exe install` registers it. Pure text.
 *
 * Restarts after a failure grow as WinSW's onfailure list says, the last
 * entry repeating; a day without one starts the list again.
 */
import { agentArgs, AGENT_STOP_TIMEOUT_S, serviceDescription, WRITTEN_BY, type AgentServiceSpec } from "./agent-service.ts";

/** The delays of the restarts after a failure, in WinSW's words; the last repeats. */
export const WINDOWS_RESTARTS = ["5 sec", "30 sec", "5 min"] as const;

const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/**
 * One word of a Windows command line, as CommandLineToArgvW and the C
 * runtime split it back: quoted when it has a space, a tab or a quote (or
 * is empty); a quote inside is escaped, and so are the backslashes before
 * a quote or before the closing one.
 */
export function quoteWindowsWord(word: string): string {
  if (word !== "" && !/[\s"]/.test(word)) return word;
  let out = '"';
  let slashes = 0;
  for (const ch of word) {
    if (ch === "\\") {
      slashes++;
      continue;
    }
    out += ch === '"' ? "\\".repeat(slashes * 2 + 1) + '"' : "\\".repeat(slashes) + ch;
    slashes = 0;
  }
  return `${out}${"\\".repeat(slashes * 2)}"`;
}

/** Why a word cannot go in WinSW's file as it is, or undefined: WinSW expands %NAME% in it. */
export function windowsWordProblem(word: string): string | undefined {
  return word.includes("%") ? "must not contain %, which the service wrapper reads as an environment variable" : undefined;
}

export function renderWinswXml(spec: AgentServiceSpec, o: { logDir: string }): string {
  return [
    "<!--",
    `  ${WRITTEN_BY}; \`burrow service uninstall\` removes it.`,
    `  The service wrapper WinSW runs it: put WinSW's executable beside this file as ${spec.name}.exe,`,
    `  then \`${spec.name}.exe install\` and \`${spec.name}.exe start\`.`,
    "-->",
    "<service>",
    `  <id>${escape(spec.name)}</id>`,
    `  <name>burrow agent (${escape(spec.name)})</name>`,
    `  <description>${escape(serviceDescription(spec))}</description>`,
    `  <executable>${escape(spec.binary)}</executable>`,
    `  <arguments>${escape(agentArgs(spec).map(quoteWindowsWord).join(" "))}</arguments>`,
    "  <startmode>Automatic</startmode>",
    "  <delayedAutoStart>true</delayedAutoStart>",
    ...WINDOWS_RESTARTS.map((delay) => `  <onfailure action="restart" delay="${delay}"/>`),
    "  <resetfailure>1 day</resetfailure>",
    `  <stoptimeout>${AGENT_STOP_TIMEOUT_S} sec</stoptimeout>`,
    `  <logpath>${escape(o.logDir)}</logpath>`,
    '  <log mode="roll-by-size">',
    "    <sizeThreshold>10240</sizeThreshold>",
    "    <keepFiles>5</keepFiles>",
    "  </log>",
    "</service>",
    "",
  ].join("\n");
}
