// Time the timeline page as a person uses it: `stepscope serve PROFILE`, headless Debian
// Chromium opening #/timeline, until every track on screen is drawn from its tiles
// (first paint; the run is loaded once before, so this is the warm page), then zooms
// at the middle of the tracks, each three presses of W (or S): 0.51× (1.95×) the
// width, past what the tiles on screen can draw (the page redraws from its tiles
// within 1.5× of their resolution). Each is timed from the first press until every
// track on screen is drawn from tiles that serve the new window. The page asks for
// tiles ahead of a zoom (1.4× finer or coarser), so some zooms are served by tiles
// asked for in the one before: `zoom_ms` is over every zoom, `zoom_fetching_ms` over
// those that asked for tiles.
//
//   node bench/timeline_paint.mjs STEPSCOPE_BINARY PROFILE [--zooms N]
//
// Uses bench/chromium.mjs (playwright-core and Debian's Chromium). Prints one line of
// JSON: first_paint_s (best and every one of 3 fresh documents), zoom_ms and
// zoom_fetching_ms (p50, p90, max, n over N zooms in, then as many out), draw_ms (the
// page's last draw of the canvas after each zoom: p50, max) and the run's event count.
import { browser, serve } from './chromium.mjs';

const [bin, profile, ...rest] = process.argv.slice(2);
if (!bin || !profile) {
  console.error('usage: node bench/timeline_paint.mjs STEPSCOPE_BINARY PROFILE [--zooms N]');
  process.exit(2);
}
const zooms = rest[0] === '--zooms' ? Number(rest[1]) : 12;

const { child: server, url } = await serve(bin, profile);
// Load the run once: the timing below is the page's, not the decoding's.
const tracks = await (await fetch(new URL('api/timeline/tracks', url))).json();

const { page, close } = await browser();

const drawnFresh = () => page.waitForFunction(
  () => window.stepscopeTimeline && !window.stepscopeTimeline.pending() && window.stepscopeTimeline.fresh(),
  null, { timeout: 120000, polling: 'raf' });

const paints = [];
const zoomMs = [];
const fetchingMs = [];
const drawMs = [];
const tileRequests = () => page.evaluate(() => performance.getEntriesByType('resource')
  .filter(e => /api\/timeline\/(tile|busy)/.test(e.name)).length);
try {
  for (let i = 0; i < 3; i++) {
    await page.goto('about:blank');
    const t = performance.now();
    await page.goto(`${url}#/timeline`);
    await drawnFresh();
    paints.push((performance.now() - t) / 1000);
  }
  const c = await page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });
  await page.mouse.move(c[0] + 230 + (c[2] - 230) / 2, c[1] + c[3] / 2);
  for (const key of ['w', 's']) {
    for (let i = 0; i < zooms; i++) {
      await page.evaluate(() => performance.clearResourceTimings());
      const t = performance.now();
      for (let k = 0; k < 3; k++) await page.keyboard.press(key);
      await drawnFresh();
      zoomMs.push(performance.now() - t);
      if (await tileRequests()) fetchingMs.push(performance.now() - t);
      drawMs.push(await page.evaluate(() => window.stepscopeTimeline.drawMs()));
    }
  }
} finally {
  await close();
  server.kill();
}
const quantiles = ms => {
  const sorted = ms.slice().sort((a, b) => a - b);
  const q = p => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]);
  return { p50: q(0.5), p90: q(0.9), max: q(1), n: sorted.length };
};
const r3 = v => Math.round(v * 1000) / 1000;
console.log(JSON.stringify({
  first_paint_s: r3(Math.min(...paints)),
  first_paint_runs_s: paints.map(r3),
  draw_ms: { p50: Math.round(drawMs.slice().sort((a, b) => a - b)[drawMs.length >> 1]), max: Math.round(Math.max(...drawMs)) },
  zoom_ms: quantiles(zoomMs),
  zoom_fetching_ms: quantiles(fetchingMs),
  events: tracks.events,
}));
