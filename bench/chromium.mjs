// What the Chromium benchmarks share: `stepscope serve` on a free port, and headless
// Debian Chromium (or $CHROMIUM) through playwright-core from tests/web/node_modules
// (scripts/test_web.sh installs it).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../tests/web/package.json'));
const { chromium } = require('playwright-core');

/** Starts `stepscope serve PROFILE`; resolves { child, url, t0 } (t0: when it was spawned). */
export function serve(bin, profile) {
  const t0 = performance.now();
  const child = spawn(bin, ['serve', profile, '--port', '0', '--no-open'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', d => {
      buf += d;
      const m = buf.match(/^stepscope: serving (http:\/\/\S+\/)\n/);
      if (m) resolve({ child, url: m[1], t0 });
    });
    child.on('exit', code => reject(new Error(`server exited with ${code}`)));
  });
}

/** A headless Chromium at 1,400×900 with a blank page open: { page, close }. */
export async function browser() {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'stepscope-bench-chromium-'));
  const context = await chromium.launchPersistentContext(dataDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] || await context.newPage();
  // The browser's own start and first page are not the server's: warm them once.
  await page.goto('about:blank');
  const close = async () => {
    await context.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  return { page, close };
}
