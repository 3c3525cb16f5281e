import { PATH_LABELS, PATH_NAMES } from './paths';
import type { BenchReport } from './report';
import { VARIANT_LABELS, VARIANT_NAMES } from './variants';

const COLORS: Record<(typeof VARIANT_NAMES)[number], string> = {
  baseline: '#9e9e9e',
  powertools: '#ff9900',
  'ours-external': '#1f6feb',
  'ours-local': '#2da44e',
  'powertools-indexed': '#b35900',
  'ours-recoverable': '#0a3d91',
};

/**
 * A self-contained HTML page (inline SVG, no scripts, nothing fetched): p50 per path and variant as measured on
 * DynamoDB Local, next to the projected DynamoDB time and cost per million calls.
 */
export function renderChart(report: BenchReport): string {
  const panels = [
    panel('p50 on DynamoDB Local (ms)', (path, variant) => rowOf(report, path, variant)?.p50),
    panel('projected DynamoDB time (ms)', (path, variant) => rowOf(report, path, variant)?.cost.projectedMs),
    panel(
      '$ per million calls (us-east-1 on-demand)',
      (path, variant) => rowOf(report, path, variant)?.cost.usdPerMillionCalls,
    ),
  ];
  const legend = VARIANT_NAMES.map(
    (variant) =>
      `<span style="margin-right:16px"><span style="display:inline-block;width:12px;height:12px;background:${COLORS[variant]}"></span> ${escapeHtml(VARIANT_LABELS[variant])}</span>`,
  ).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>keystone-idempotency benchmark</title>
<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{font-size:18px}h2{font-size:15px;margin-top:28px}</style>
</head><body>
<h1>keystone-idempotency benchmark, ${escapeHtml(report.machine.date)}</h1>
<p>${report.machine.nproc} CPUs, ${report.machine.memoryGiB} GiB, Node ${escapeHtml(report.machine.node)}, DynamoDB Local ${escapeHtml(report.machine.dynamoDbLocal)}.
Numbers: bench/results/latest.json; method and discussion: bench/README.md.</p>
<p>${legend}</p>
${panels.join('\n')}
</body></html>
`;
}

function rowOf(report: BenchReport, path: string, variant: string) {
  return report.paths.find((row) => row.path === path && row.variant === variant);
}

function panel(title: string, value: (path: string, variant: (typeof VARIANT_NAMES)[number]) => number | undefined) {
  const barHeight = 14;
  const groupGap = 14;
  const labelWidth = 230;
  const plotWidth = 420;
  const values = PATH_NAMES.flatMap((path) => VARIANT_NAMES.map((variant) => value(path, variant) ?? 0));
  const max = Math.max(...values, 1e-9);
  let y = 0;
  const parts: string[] = [];
  for (const path of PATH_NAMES) {
    parts.push(`<text x="0" y="${y + barHeight}" font-weight="bold">${escapeHtml(PATH_LABELS[path])}</text>`);
    for (const [index, variant] of VARIANT_NAMES.entries()) {
      const v = value(path, variant);
      if (v === undefined) continue;
      const top = y + index * (barHeight + 2);
      const width = (v / max) * plotWidth;
      parts.push(
        `<rect x="${labelWidth}" y="${top}" width="${width.toFixed(1)}" height="${barHeight}" fill="${COLORS[variant]}"/>`,
        `<text x="${(labelWidth + width + 4).toFixed(1)}" y="${top + barHeight - 3}" font-size="11">${v.toFixed(2)}</text>`,
      );
    }
    y += VARIANT_NAMES.length * (barHeight + 2) + groupGap;
  }
  return `<h2>${escapeHtml(title)}</h2>
<svg width="${labelWidth + plotWidth + 60}" height="${y}" font-size="12" xmlns="http://www.w3.org/2000/svg">${parts.join('')}</svg>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"]/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[char] as string);
}
