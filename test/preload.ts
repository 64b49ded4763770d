/**
 * Before a test file: give it its own temporary directory (removed after its
 * last test), and find (or install) the system programs some tests drive (the
 * panel's browser, qemu-user for the arm64 build, the Pebble test CA for
 * ACME), so that a slow first install happens outside any test's time limit.
 */
import { afterAll } from "bun:test";
import { chromiumPath } from "./harness/chromium.ts";
import { pebbleSkipReason } from "./harness/pebble.ts";
import { arm64Runner } from "./harness/qemu.ts";
import { useScratchTmpdir } from "./harness/scratch.ts";

// no server a test starts looks for releases on the internet (a test that wants the look says --update-check on)
process.env.BURROW_UPDATE_CHECK ??= "off";

const removeScratch = useScratchTmpdir();
afterAll(removeScratch);

chromiumPath();
arm64Runner();
pebbleSkipReason();
