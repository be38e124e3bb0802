/**
 * A stacked bar chart in SVG, drawn here (no library, no CDN: the console's CSP allows nothing but
 * its own bundle). Colours come from the stylesheet's classes; the chart is an image with a text
 * alternative, and the numbers are in a table beside it for whoever cannot see it.
 */
const SVG = 'http://www.w3.org/2000/svg';

export interface StackedSeries {
  /** The class of its bars (`bar-allow`, …) and its name in the legend. */
  name: string;
  className: string;
  values: number[];
}

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | number>,
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  return element;
}

/** One bar per slot, its series stacked; `labels` name the slots (shown every few bars) and `title` says what it shows. */
export function stackedBars(title: string, labels: string[], series: StackedSeries[]): SVGSVGElement {
  const width = 640;
  const height = 140;
  const margin = { top: 10, right: 10, bottom: 22, left: 40 };
  const plotWidth = width - margin.left - margin.right;
  const plotHeight = height - margin.top - margin.bottom;
  const totals = labels.map((_, index) => series.reduce((sum, each) => sum + (each.values[index] ?? 0), 0));
  const max = Math.max(1, ...totals);
  const slot = plotWidth / Math.max(labels.length, 1);
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', class: 'chart' });
  const name = svg('title', {});
  name.textContent = `${title}: ${totals.reduce((sum, value) => sum + value, 0)} decisions, at most ${max} in a minute`;
  chart.append(name);
  chart.append(
    svg('line', {
      x1: margin.left,
      x2: width - margin.right,
      y1: height - margin.bottom,
      y2: height - margin.bottom,
      class: 'axis',
    }),
  );
  const top = svg('text', { x: margin.left - 6, y: margin.top + 8, 'text-anchor': 'end', class: 'tick' });
  top.textContent = String(max);
  chart.append(top);
  labels.forEach((label, index) => {
    let base = height - margin.bottom;
    for (const each of series) {
      const value = each.values[index] ?? 0;
      if (!value) continue;
      const barHeight = (value / max) * plotHeight;
      base -= barHeight;
      const bar = svg('rect', {
        x: margin.left + index * slot + 1,
        y: base,
        width: Math.max(slot - 2, 1),
        height: barHeight,
        class: each.className,
      });
      const tip = svg('title', {});
      tip.textContent = `${label}: ${value} ${each.name}`;
      bar.append(tip);
      chart.append(bar);
    }
    if (index % 10 === 0 || index === labels.length - 1) {
      const tick = svg('text', {
        x: margin.left + index * slot + slot / 2,
        y: height - 6,
        'text-anchor': 'middle',
        class: 'tick',
      });
      tick.textContent = label;
      chart.append(tick);
    }
  });
  return chart;
}
