/**
 * stdout for the agent's lines. A busy tunnel logs thousands of requests a
 * second: lines go out together at most FLUSH_MS after the first of them, in
 * one write, rather than a console.log (and a system call) each; a person
 * reading them sees no delay, a busy tunnel makes a few writes where it
 * would make thousands.
 */
const FLUSH_MS = 10;
let pending: string[] = [];
let timer: ReturnType<typeof setTimeout> | undefined;

export function print(line: string): void {
  if (pending.length === 0) timer = setTimeout(flushLines, FLUSH_MS);
  pending.push(line);
}

/** Writes what is pending now (before a line on stderr, or an exit). */
export function flushLines(): void {
  clearTimeout(timer);
  timer = undefined;
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
