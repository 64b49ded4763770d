/**
 * burrow diagnose's report: lines for a person (a check a line, what to do
 * under each warning and failure), or one JSON object for scripts (its
 * shape is in docs/reference/cli.md, `burrow diagnose`).
 */
import { hidePassword } from "../../log-redact.ts";
import { PROTOCOL_VERSION } from "../../protocol/wire.ts";
import { VERSION } from "../../version.ts";
import { wrap } from "../usage.ts";
import { CHECK_TITLES, firstFailure, type CheckResult, type Status } from "./checks.ts";

const WORD: Record<Status, string> = { pass: "ok", warn: "warn", fail: "FAIL", skip: "skip" };
const LABEL_WIDTH = 16;
const WIDTH = 100;

/** A check as scripts name it: its id, "tunnel:NAME" for a tunnel's. */
export const checkName = (r: CheckResult) => (r.tunnel !== undefined ? `tunnel:${r.tunnel}` : r.id);

export interface Report {
  ok: boolean;
  /** The first check that failed, or null. */
  first_failure: string | null;
  /** Every check that failed, in order. */
  failed: string[];
  server: string;
  agent_version: string;
  protocol_version: number;
  checked_at: string;
  checks: (CheckResult & { title: string })[];
}

export function report(server: string, results: CheckResult[], at = new Date()): Report {
  const failed = results.filter((r) => r.status === "fail").map(checkName);
  const first = firstFailure(results);
  return {
    ok: failed.length === 0,
    first_failure: first ? checkName(first) : null,
    failed,
    server: hidePassword(server),
    agent_version: VERSION,
    protocol_version: PROTOCOL_VERSION,
    checked_at: at.toISOString(),
    checks: results.map((r) => ({ ...r, title: CHECK_TITLES[r.id] })),
  };
}

export function reportText(r: Report): string {
  const lines = [`burrow diagnose ${r.server} (this agent: burrow ${r.agent_version}, protocol ${r.protocol_version})`, ""];
  const indent = " ".repeat(2 + 6 + LABEL_WIDTH);
  for (const c of r.checks) {
    const label = (c.tunnel !== undefined ? `tunnel ${c.tunnel}` : c.id).padEnd(LABEL_WIDTH - 1);
    const detail = wrap(`${c.detail}${c.ms !== undefined ? ` (${c.ms} ms)` : ""}`, WIDTH - indent.length);
    lines.push(`  ${WORD[c.status].padEnd(5)} ${label} ${detail[0] ?? ""}`, ...detail.slice(1).map((l) => indent + l));
    if (c.advice && (c.status === "fail" || c.status === "warn")) lines.push(...wrap(`-> ${c.advice}`, WIDTH - indent.length).map((l) => indent + l));
  }
  lines.push("");
  if (r.ok) {
    const warned = r.checks.filter((c) => c.status === "warn").length;
    lines.push(warned > 0 ? `No check failed; ${warned} warning${warned === 1 ? "" : "s"} above.` : "Every check passed.");
  } else {
    lines.push(`${r.failed.length} check${r.failed.length === 1 ? "" : "s"} failed: ${r.failed.join(", ")}. The first, ${r.first_failure}, is where to start.`);
  }
  return `${lines.join("\n")}\n`;
}
