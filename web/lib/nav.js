// Links between pages: a page's hash (#/page?…) keeping the current run and host.
import { el } from './dom.js';

/** The hash of `page` with `params`, run and host kept from the current route unless given. */
export function hashFor(page, params = {}) {
  const cur = new URLSearchParams((location.hash.split('?')[1]) || '');
  const p = new URLSearchParams();
  for (const k of ['run', 'host']) if (cur.get(k)) p.set(k, cur.get(k));
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === '') p.delete(k); else p.set(k, String(v));
  }
  const q = p.toString();
  return `#/${page}${q ? '?' + q : ''}`;
}

/** A link to another page. */
export function pageLink(text, page, params = {}, attrs = {}) {
  return el('a', { ...attrs, href: hashFor(page, params) }, text);
}

/** An op name linking to its HLO view (`extra`: e.g. another run). */
export function opLink(name, module, extra = {}) {
  if (!name) return '';
  return pageLink(name, 'hlo', { op: name, module: module || null, ...extra }, { class: 'oplink', title: `${name}: HLO instruction, operands and fusion body` });
}
