import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type BenchReport, renderReport } from './report';

/**
 * `npx tsx --conditions=keystone-source bench/markdown.ts [results.json]`: a committed run's report with its tables in
 * Markdown, for bench/README.md to quote, so the figures there are the run's own and not copied by hand. Reads
 * `bench/results/latest.json` unless given another file.
 */
const file = process.argv[2] ?? join(__dirname, 'results', 'latest.json');
const report = JSON.parse(readFileSync(file, 'utf8')) as BenchReport;
process.stdout.write(`${renderReport(report, { markdown: true })}\n`);
