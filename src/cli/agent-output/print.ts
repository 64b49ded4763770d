/**
 * stdout for the agent's lines. A busy tunnel logs thousands of requests a
 * second: lines written in one turn of the event loop go out in one write at
 * its end, rather than a console.log (and a system call) each.
 */
let pending: string[] = [];

export function print(line: string): void {
  if (pending.length === 0) setImmediate(flushLines);
  pending.push(line);
}

/** Writes what is pending now (before a line on stderr, or an exit). */
export function flushLines(): void {
  if (pending.length === 0) return;
  const text = pending.join("\n") + "\n";
  pending = [];
  process.stdout.write(text);
}

let stampSecond = 0;
let stampText = "";
/** HH:MM:SS local time, formatted once a second (a busy tunnel prints many lines a second). */
export function timestamp(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== stampSecond) {
    stampSecond = second;
    stampText = new Date().toTimeString().slice(0, 8);
  }
  return stampText;
}

const CONTROL = /[\x00-\x1f\x7f-\x9f]/g;
/**
 * Text from visitors (a request's path) as it may reach a terminal: control
 * characters, escape sequences' ESC first, shown as "?" so that no visitor
 * can move the cursor, change colours or retitle the window of the person
 * running the agent.
 */
export function printable(text: string): string {
  CONTROL.lastIndex = 0;
  return CONTROL.test(text) ? text.replace(CONTROL, "?") : text;
}
