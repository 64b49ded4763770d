/**
 * The count of descriptors in use the edge's pressure watch and the metrics
 * read: it follows descriptors as they are opened and closed, whichever way
 * the system gives it (/proc/self/fd's size on Linux 6.2 and later, else its
 * listing), within the one a listing holds for itself.
 */
import { expect, test } from "bun:test";
import { closeSync, openSync, readdirSync } from "node:fs";
import { descriptorsInUse } from "../../src/os/descriptors.ts";

test("descriptors in use: up by 200 when 200 are opened, back when they close, as a listing counts them", () => {
  const before = descriptorsInUse();
  if (before === undefined) return; // a system that tells none
  const listed = () => readdirSync("/proc/self/fd").length;
  const opened: number[] = [];
  try {
    for (let i = 0; i < 200; i++) opened.push(openSync("/dev/null", "r"));
    const during = descriptorsInUse()!;
    expect(during - before).toBe(200);
    expect(Math.abs(during - listed())).toBeLessThanOrEqual(1);
  } finally {
    for (const fd of opened) closeSync(fd);
  }
  expect(descriptorsInUse()).toBe(before);
});
