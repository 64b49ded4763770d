/**
 * Before any test: find (or install) the browser the panel tests drive, so
 * that a slow first install happens outside any test's time limit.
 */
import { chromiumPath } from "./harness/chromium.ts";

chromiumPath();
