// The JSON API client: GET <base>api/PATH?params, throwing the server's error message.

/** How long a request may take before the page says it failed. */
export const TIMEOUT_MS = 120000;

export async function api(path, params = {}, signal) {
  const url = new URL(`api/${path}`, document.baseURI);
  for (const [k, v] of Object.entries(params)) {
    if (v !== '' && v !== null && v !== undefined) url.searchParams.set(k, v);
  }
  const limit = AbortSignal.timeout(TIMEOUT_MS);
  let res;
  try {
    res = await fetch(url, { signal: signal ? AbortSignal.any([signal, limit]) : limit, cache: 'no-store' });
  } catch (e) {
    if (limit.aborted) throw new Error(`the server did not answer api/${path} within ${TIMEOUT_MS / 1000} s`);
    if (signal && signal.aborted) throw e;
    throw new Error(`cannot reach the server for api/${path} (${e.message}): is stepscope serve still running?`);
  }
  let body;
  try {
    body = await res.json();
  } catch (e) {
    // Cancelled while the answer was read: the caller asked for that.
    if (signal && signal.aborted) throw e;
    if (limit.aborted) throw new Error(`the server did not answer api/${path} within ${TIMEOUT_MS / 1000} s`);
    if (res.ok) throw new Error(`api/${path}: the answer is not JSON (${e.message})`);
    body = { error: `${res.status} ${res.statusText}` };
  }
  if (!res.ok) {
    // The status goes with the message: 507 is a run whose hosts do not fit in the
    // server's memory together (pages then offer them one at a time).
    const err = new Error(body.error || `${res.status} ${res.statusText}`);
    err.status = res.status;
    throw err;
  }
  return body;
}
