// The JSON API client: GET <base>api/PATH?params, throwing the server's error message.

export async function api(path, params = {}, signal) {
  const url = new URL(`api/${path}`, document.baseURI);
  for (const [k, v] of Object.entries(params)) {
    if (v !== '' && v !== null && v !== undefined) url.searchParams.set(k, v);
  }
  const res = await fetch(url, { signal, cache: 'no-store' });
  const body = await res.json().catch(() => ({ error: `${res.status} ${res.statusText}` }));
  if (!res.ok) throw new Error(body.error || `${res.status} ${res.statusText}`);
  return body;
}
