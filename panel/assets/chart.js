// A grouped bar chart in inline SVG, drawn with attributes only (the CSP allows no inline styles): enough for
// usage per month, with the figures also in a table beside it for screen readers and exact reading.

const NS = 'http://www.w3.org/2000/svg';

function el(name, attrs, ...children) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) if (c != null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten, for readable gridlines.
function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// barChart draws groups (e.g. months) of bars (one per series). series: [{ key, label, className }],
// groups: [{ label, values: { key: number } }].
export function barChart({ series, groups, title, height = 220 }) {
  const width = 960;
  const pad = { top: 16, right: 12, bottom: 28, left: 48 };
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const max = niceMax(Math.max(0, ...groups.flatMap((g) => series.map((s) => g.values[s.key] || 0))));
  const svg = el('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img', 'aria-label': title, preserveAspectRatio: 'xMidYMid meet' },
    el('title', {}, title));
  for (let i = 0; i <= 4; i++) {
    const v = (max / 4) * i;
    const y = pad.top + innerH - (innerH * i) / 4;
    svg.append(el('line', { x1: pad.left, x2: width - pad.right, y1: y, y2: y, class: i ? 'grid' : 'axis' }));
    svg.append(el('text', { x: pad.left - 8, y: y + 4, class: 'tick', 'text-anchor': 'end' }, Number.isInteger(v) ? v.toLocaleString() : v.toFixed(1)));
  }
  const groupW = innerW / Math.max(1, groups.length);
  const barW = Math.min(28, (groupW * 0.7) / series.length);
  groups.forEach((g, gi) => {
    const x0 = pad.left + gi * groupW + (groupW - barW * series.length) / 2;
    series.forEach((s, si) => {
      const v = g.values[s.key] || 0;
      const bh = (innerH * v) / max;
      svg.append(el('rect', {
        x: x0 + si * barW + 1, y: pad.top + innerH - bh, width: Math.max(1, barW - 2), height: bh,
        class: 'bar ' + s.className, rx: 2,
      }, el('title', {}, `${g.label} · ${s.label}: ${v.toLocaleString()}`)));
    });
    svg.append(el('text', { x: pad.left + gi * groupW + groupW / 2, y: height - 8, class: 'tick', 'text-anchor': 'middle' }, g.label));
  });
  const legend = document.createElement('div');
  legend.className = 'chart-legend';
  for (const s of series) {
    const item = document.createElement('span');
    item.className = 'legend-item';
    const sw = el('svg', { viewBox: '0 0 10 10', width: 10, height: 10, 'aria-hidden': 'true' }, el('rect', { width: 10, height: 10, rx: 2, class: 'bar ' + s.className }));
    item.append(sw, document.createTextNode(s.label));
    legend.append(item);
  }
  const wrap = document.createElement('figure');
  wrap.className = 'chart-wrap';
  wrap.append(svg, legend);
  return wrap;
}
