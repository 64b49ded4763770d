/**
 * Colour in the agent's lines, only where a person reads them: a terminal
 * that is not TERM=dumb. NO_COLOR (no-color.org) turns it off and
 * FORCE_COLOR on (0 off), as most command-line tools agree. Windows 10 and
 * later terminals take the same escape codes.
 */
export interface ColourContext {
  isTTY: boolean | undefined;
  env: Record<string, string | undefined>;
}

export function colourWanted({ isTTY, env }: ColourContext): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined && force !== "") return force !== "0" && force !== "false";
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (!isTTY) return false;
  return env.TERM !== "dumb";
}

export interface Paint {
  bold(text: string): string;
  dim(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  red(text: string): string;
  cyan(text: string): string;
  /** an HTTP status in its class's colour: 2xx green, 3xx cyan, 4xx yellow, 5xx and what is no status red */
  status(code: number | string, text?: string): string;
}

const sgr = (on: number, off: number) => (text: string) => `\x1b[${on}m${text}\x1b[${off}m`;
const plain = (text: string) => text;

export function paint(enabled: boolean): Paint {
  const p = enabled
    ? { bold: sgr(1, 22), dim: sgr(2, 22), green: sgr(32, 39), yellow: sgr(33, 39), red: sgr(31, 39), cyan: sgr(36, 39) }
    : { bold: plain, dim: plain, green: plain, yellow: plain, red: plain, cyan: plain };
  return {
    ...p,
    status(code, text = String(code)) {
      const n = typeof code === "number" ? code : Number.parseInt(code, 10); // "101 websocket" is 101
      if (!(n >= 100) || n >= 500) return p.red(text);
      if (n >= 400) return p.yellow(text);
      if (n >= 300) return p.cyan(text);
      return p.green(text);
    },
  };
}

/** The paint for a stream of this process. */
export function paintFor(stream: { isTTY?: boolean }): Paint {
  return paint(colourWanted({ isTTY: stream.isTTY, env: process.env }));
}
