import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { type BenchReport, markdownReport } from './report';

/**
 * `npm run bench:report [-- results.json]`: a run's tables in Markdown, written next to its JSON
 * (bench/results/latest.md beside latest.json), without running the bench again. `npm run bench` writes the same file
 * at its end; this is for a report whose rendering changed, or a run kept elsewhere.
 */
const json = resolve(process.argv[2] ?? join(__dirname, 'results', 'latest.json'));
const { file, text } = markdownReport(JSON.parse(readFileSync(json, 'utf8')) as BenchReport, json);
writeFileSync(file, text);
console.log(`written to ${relative(process.cwd(), file)}`);
