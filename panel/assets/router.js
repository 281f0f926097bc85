// Hash routing: the address says which page and with what filters, so every view can be linked and reloaded.
// A page is rendered into a context that is disposed when the next one starts: its requests are aborted, its
// timers and subscriptions ended.

// parseHash splits "#/servers/12?status=FAILED" into segments and query parameters.
export function parseHash() {
  const raw = location.hash.replace(/^#/, '');
  const [pathPart, queryPart = ''] = raw.split('?');
  const segments = pathPart.split('/').filter(Boolean).map((s) => {
    try { return decodeURIComponent(s); } catch { return s; }
  });
  return { raw, segments, query: new URLSearchParams(queryPart) };
}

// href builds a hash link; empty and null parameters are left out.
export function href(path, params) {
  const qs = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v != null && v !== '')).toString() : '';
  return '#' + path + (qs ? '?' + qs : '');
}

let rerender = () => {};

// onNavigate registers the renderer navigate() calls when the hash does not change.
export function onNavigate(fn) { rerender = fn; }

// navigate goes to a hash link, rendering again when it is the current one.
export function navigate(to) {
  if (location.hash === to) rerender();
  else location.hash = to;
}

// newContext is a page's lifetime: alive until disposed, with a signal for its fetches and cleanups.
export function newContext() {
  const controller = new AbortController();
  return {
    alive: true,
    signal: controller.signal,
    cleanups: [],
    onCleanup(fn) { this.cleanups.push(fn); },
    // every runs fn each ms while the page is shown and visible, and stops with the page.
    every(ms, fn) {
      const t = setInterval(() => { if (this.alive && document.visibilityState === 'visible') fn(); }, ms);
      this.onCleanup(() => clearInterval(t));
    },
    dispose() {
      this.alive = false;
      controller.abort();
      for (const fn of this.cleanups) {
        try { fn(); } catch (e) { console.error(e); }
      }
    },
  };
}
