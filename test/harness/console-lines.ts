/**
 * The lines burrow's log writes to the console (log.ts writes through
 * console.log, warn and error) while each test of a file runs, kept instead
 * of printed: a test reads `captured.lines`, which starts empty for every test.
 */
import { afterEach, beforeEach, spyOn } from "bun:test";

type Method = "log" | "warn" | "error";

export function captureConsole(...methods: Method[]): { readonly lines: string[] } {
  const captured = { lines: [] as string[] };
  let spies: ReturnType<typeof spyOn>[] = [];
  beforeEach(() => {
    captured.lines = [];
    spies = methods.map((m) => spyOn(console, m).mockImplementation((line: string) => void captured.lines.push(line)));
  });
  afterEach(() => spies.forEach((s) => s.mockRestore()));
  return captured;
}
