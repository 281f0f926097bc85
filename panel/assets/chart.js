// Charts in inline SVG, drawn with attributes only (the CSP allows no inline styles): grouped bars for usage per
// month, and bars and lines along time for the activity charts; the pages list the figures in a table beside
// each, for screen readers and exact reading.

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

// quarterMax rounds a maximum up to 4 times a whole step of 1, 2, 2.5 or 5 times a power of ten (at least 4),
// so that each of the four gridlines above zero falls on a whole number: counts never read 2.5.
function quarterMax(v) {
  const step = Math.max(1, v / 4);
  const p = 10 ** Math.floor(Math.log10(step));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= step && Number.isInteger(m * p)) return 4 * m * p;
  return 40 * p;
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

// timeChart draws one slot per period (an hour, a day) along time: bars, stacked in the order given, and lines
// over them. A line is drawn on the left axis, or with right: true on a right axis from 0 to right.max (a
// rate); it skips the periods whose value is null, so a gap reads as "nothing to measure", never as zero.
// points: [{ label, tick, values: { key: number | null } }], oldest first; tick is the axis label under the
// period ('' for none), label names it in the tooltip. series entries: { key, label, className, format }.
// Each slot carries a transparent hit area whose tooltip lists every series' value in that period.
export function timeChart({ title, points, bars = [], lines = [], right = null, height = 220, format = (v) => v.toLocaleString() }) {
  const width = 960;
  const pad = { top: 16, right: right ? 52 : 12, bottom: 28, left: 52 };
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const leftLines = lines.filter((s) => !s.right);
  const leftValues = points.flatMap((p) => [bars.reduce((sum, s) => sum + (p.values[s.key] || 0), 0),
    ...leftLines.map((s) => p.values[s.key] || 0)]);
  const max = quarterMax(Math.max(0, ...leftValues));
  const yLeft = (v) => pad.top + innerH - (innerH * v) / max;
  const yRight = (v) => pad.top + innerH - (innerH * v) / right.max;
  const svg = el('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img', 'aria-label': title, preserveAspectRatio: 'xMidYMid meet' },
    el('title', {}, title));
  for (let i = 0; i <= 4; i++) {
    const y = pad.top + innerH - (innerH * i) / 4;
    svg.append(el('line', { x1: pad.left, x2: width - pad.right, y1: y, y2: y, class: i ? 'grid' : 'axis' }));
    svg.append(el('text', { x: pad.left - 8, y: y + 4, class: 'tick', 'text-anchor': 'end' }, format((max / 4) * i)));
    if (right) svg.append(el('text', { x: width - pad.right + 8, y: y + 4, class: 'tick', 'text-anchor': 'start' }, right.format((right.max / 4) * i)));
  }
  const slotW = innerW / Math.max(1, points.length);
  const barW = Math.max(1, Math.min(28, slotW * 0.7));
  const x = (i) => pad.left + i * slotW + slotW / 2;
  points.forEach((p, i) => {
    let base = 0;
    for (const s of bars) {
      const v = p.values[s.key] || 0;
      if (!v) continue;
      svg.append(el('rect', { x: x(i) - barW / 2, y: yLeft(base + v), width: barW, height: yLeft(base) - yLeft(base + v), class: 'bar ' + s.className }));
      base += v;
    }
    if (p.tick) svg.append(el('text', { x: x(i), y: height - 8, class: 'tick', 'text-anchor': 'middle' }, p.tick));
  });
  for (const s of lines) {
    const y = s.right ? yRight : yLeft;
    let run = [];
    const flush = () => {
      if (run.length === 1) svg.append(el('circle', { cx: run[0][0], cy: run[0][1], r: 2.5, class: 'dot ' + s.className }));
      else if (run.length) svg.append(el('polyline', { points: run.map((pt) => pt.join(',')).join(' '), class: 'line ' + s.className }));
      run = [];
    };
    points.forEach((p, i) => {
      const v = p.values[s.key];
      if (v == null) flush();
      else run.push([x(i).toFixed(1), y(v).toFixed(1)]);
    });
    flush();
  }
  const all = [...bars, ...lines];
  points.forEach((p, i) => {
    const text = [p.label, ...all.map((s) => {
      const v = p.values[s.key];
      return `${s.label}: ${v == null ? '—' : (s.format || format)(v)}`;
    })].join('\n');
    svg.append(el('rect', { x: pad.left + i * slotW, y: pad.top, width: slotW, height: innerH, class: 'hit' }, el('title', {}, text)));
  });
  const legend = document.createElement('div');
  legend.className = 'chart-legend';
  for (const s of all) {
    const item = document.createElement('span');
    item.className = 'legend-item';
    const swatch = bars.includes(s)
      ? el('rect', { width: 10, height: 10, rx: 2, class: 'bar ' + s.className })
      : el('line', { x1: 0, x2: 10, y1: 5, y2: 5, class: 'line ' + s.className });
    item.append(el('svg', { viewBox: '0 0 10 10', width: 10, height: 10, 'aria-hidden': 'true' }, swatch),
      document.createTextNode(s.label + (s.right && right && right.name ? ` (${right.name})` : '')));
    legend.append(item);
  }
  const wrap = document.createElement('figure');
  wrap.className = 'chart-wrap';
  wrap.append(svg, legend);
  return wrap;
}
