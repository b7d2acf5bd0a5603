import type { Browser } from 'playwright-core';
import type { BuildOptions } from 'esbuild';

export type { Browser, Page } from 'playwright-core';

/** The flags every test Chromium runs with. */
export declare const CHROMIUM_FLAGS: readonly string[];
/** The Chromium binary: `CHROMIUM_PATH`, else Debian's `/usr/bin/chromium`. */
export declare function chromiumPath(): string;
/** Starts a headless Chromium; fails with the install command when there is none. */
export declare function launchChromium(): Promise<Browser>;
/** Bundles `entry` (and everything it imports) into one ES module for the page. */
export declare function bundleForBrowser(entry: string, options?: BuildOptions): Promise<string>;
