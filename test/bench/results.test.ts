import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type BenchReport, markdownReport } from '../../bench/report';

/**
 * The committed run's tables are generated, not copied: bench/results/latest.md is exactly what `npm run
 * bench:report` renders from bench/results/latest.json, so a figure in it is the run's own.
 */
const results = resolve(__dirname, '..', '..', 'bench', 'results');
const json = join(results, 'latest.json');

describe("the committed bench run's tables", () => {
  const committed = readFileSync(join(results, 'latest.md'), 'utf8');

  it('are what bench/markdown.ts renders from latest.json, not edited by hand', () => {
    const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
    const { file, text } = markdownReport(report, json);
    expect(file).toBe(join(results, 'latest.md'));
    expect(committed).toBe(text);
  });

  it('give every section a heading of its own, listed at the top', () => {
    const titles = [...committed.matchAll(/^## (.+)$/gm)].map(([, title]) => title);
    expect(titles).toEqual(expect.arrayContaining(['Per call against DynamoDB Local', 'Reference targets']));
    expect(new Set(titles).size).toBe(titles.length);
    const contents = committed.split('\n').find((line) => line.startsWith('Contents: ')) ?? '';
    for (const title of titles) expect(contents).toContain(`[${title}](#`);
  });
});
