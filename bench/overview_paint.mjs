// Time the web UI's first page as a person meets it: `stepscope serve PROFILE` started
// cold, headless Debian Chromium opening the overview, until the overview is painted
// (its cards, findings, breakdown and step chart in the page, then two animation
// frames). Then the same page again on the warm server (a fresh document each time).
//
//   node bench/overview_paint.mjs STEPSCOPE_BINARY PROFILE [--repeat N]
//
// Uses bench/chromium.mjs (playwright-core and Debian's Chromium). Prints one line of
// JSON: cold_s (from starting the server process to painted, its decoding and analyses
// included), the best and every cold run over N fresh servers, warm_s (best of N
// reloads), and the events the overview's summary covered.
import { browser, serve as start } from './chromium.mjs';

const [bin, profile, ...rest] = process.argv.slice(2);
if (!bin || !profile) {
  console.error('usage: node bench/overview_paint.mjs STEPSCOPE_BINARY PROFILE [--repeat N]');
  process.exit(2);
}
const repeat = rest[0] === '--repeat' ? Number(rest[1]) : 3;

const serve = () => start(bin, profile);

/** Opens the overview in a fresh document; resolves once it is painted. */
async function paint(page, url) {
  await page.goto('about:blank');
  await page.goto(`${url}#/overview`);
  await page.waitForSelector('.cards .card', { timeout: 120000 });
  await page.waitForSelector('.breakdown, #no-breakdown', { timeout: 120000 });
  await page.waitForFunction(() => !document.querySelector('#view .loading'), null, { timeout: 120000 });
  await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
}

const { page, close } = await browser();

const cold = [];
const warm = [];
let events = null;
try {
  for (let i = 0; i < repeat; i++) {
    const { child, url, t0 } = await serve();
    try {
      await paint(page, url);
      cold.push((performance.now() - t0) / 1000);
      for (let k = 0; k < repeat; k++) {
        const t = performance.now();
        await paint(page, url);
        warm.push((performance.now() - t) / 1000);
      }
      if (events === null) {
        const r = await fetch(new URL('api/runs', url));
        const runs = await r.json();
        events = runs.length ? runs[runs.length - 1].bytes ?? null : null;
      }
    } finally {
      child.kill();
    }
  }
} finally {
  await close();
}
const round = v => Math.round(v * 1000) / 1000;
console.log(JSON.stringify({
  cold_s: round(Math.min(...cold)),
  cold_runs_s: cold.map(round),
  warm_s: round(Math.min(...warm)),
  warm_runs_s: warm.map(round),
  run_bytes: events,
}));
