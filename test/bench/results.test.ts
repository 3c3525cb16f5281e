import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { type BenchReport, markdownReport } from '../../bench/report';

/**
 * The committed run's tables are generated, not copied: bench/results/latest.md is exactly what `npm run
 * bench:report` renders from bench/results/latest.json. bench/README.md stays a page a team reads (at most 3,000
 * words, as `wc -w` counts them), links to those tables, and quotes in its verdicts only figures they hold.
 */
const bench = resolve(__dirname, '..', '..', 'bench');
const json = join(bench, 'results', 'latest.json');
const committed = readFileSync(join(bench, 'results', 'latest.md'), 'utf8');
const readme = readFileSync(join(bench, 'README.md'), 'utf8');

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
const headingsOf = (markdown: string) => [...markdown.matchAll(/^#{1,6} (.+)$/gm)].map(([, text = '']) => text);

describe("the committed bench run's tables", () => {
  it('are what bench/markdown.ts renders from latest.json, not edited by hand', () => {
    const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
    const { file, text } = markdownReport(report, json);
    expect(file).toBe(join(bench, 'results', 'latest.md'));
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

describe('bench/README.md', () => {
  it('is at most 3,000 words', () => {
    expect(readme.split(/\s+/).filter(Boolean).length).toBeLessThanOrEqual(3000);
  });

  it('links to the generated results, and every results file and section it links exists', () => {
    const links = [...readme.matchAll(/\]\((results\/[^)#\s]+)(?:#([^)\s]+))?\)/g)].map(([, path = '', section]) => ({
      path,
      section,
    }));
    expect(links.filter((link) => link.path === 'results/latest.md' && link.section).length).toBeGreaterThan(10);
    const broken = links.filter(({ path, section }) => {
      const file = resolve(dirname(join(bench, 'README.md')), path);
      if (!existsSync(file)) return true;
      return section !== undefined && !headingsOf(readFileSync(file, 'utf8')).map(anchor).includes(section);
    });
    expect(broken).toEqual([]);
  });

  it("quotes in its verdict table only figures the run's tables hold, each in the section its row links to", () => {
    /** The generated file's sections by anchor; a row's figures are in its own section or in the targets table. */
    const sections = new Map(
      committed.split(/^(?=## )/m).map((part) => [anchor(part.slice(3, part.indexOf('\n'))), part] as const),
    );
    const start = readme.indexOf('## Targets and verdicts');
    const rows = readme
      .slice(start, readme.indexOf('\n## ', start + 1))
      .split('\n')
      .filter((line) => line.startsWith('|'))
      .slice(2);
    let linked = '';
    const misquoted = rows.flatMap((row) => {
      linked = /\]\(results\/latest\.md#([^)]+)\)/.exec(row)?.[1] ?? linked; // a row without a link: the one above's
      const source = `${sections.get(linked) ?? ''}${sections.get('reference-targets') ?? ''}`;
      const figures = row
        .replace(/\]\([^)]*\)/g, ']')
        .match(/\d+\.\d+x \[\d+\.\d+-\d+\.\d+\]|\d+(?:\.\d+)?x\b|\d+(?:\.\d+)? (?:ms|KB)\b/g);
      return (figures ?? []).filter((figure) => !source.includes(figure)).map((figure) => `${linked}: ${figure}`);
    });
    expect(rows.length).toBeGreaterThan(10);
    expect(misquoted).toEqual([]);
  });
});
