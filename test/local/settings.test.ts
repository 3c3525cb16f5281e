import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Every environment variable the local stack (and `npm run processor`, `npm run openapi`) reads is documented in
 * the README. The variables are found in the source, the way they are read (`env.X`, `numberEnv('X', ...)`, a
 * table's `envVar`), so a new setting that is not documented fails here.
 */
const root = join(__dirname, '..', '..');
// The README and the pages under docs/ (the settings table is in docs/local-stack.md).
const readme = ['README.md', ...readdirSync(join(root, 'docs')).map((name) => join('docs', name))]
  .filter((path) => path.endsWith('.md'))
  .map((path) => readFileSync(join(root, path), 'utf8'))
  .join('\n');

/** Set by the stack for the handlers, never by the person starting it. */
const SET_BY_THE_STACK = new Set(['SETTLEMENT_QUEUE_URL', 'SETTLEMENT_DLQ_URL']);
/** Deployed only: the webhook secret comes from Secrets Manager in AWS, directly from the variable locally. */
const DEPLOYED_ONLY = new Set(['PROCESSOR_WEBHOOK_SECRET_ARN']);

const READS = [
  /\b(?:numberEnv|requireEnv|optionalEnv|secretFromEnv|portFromEnv)\(\s*'([A-Z][A-Z0-9_]*)'/g,
  /\benv(?:\.|\[')([A-Z][A-Z0-9_]*)/g,
  /\bprocess\.env\.([A-Z][A-Z0-9_]*)/g,
  /\benvVar: '([A-Z][A-Z0-9_]*)'/g,
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'infra' ? [] : sourceFiles(path); // lib/infra: CDK, deploy time
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const files = [
  ...sourceFiles(join(root, 'lib')),
  ...sourceFiles(join(root, 'functions')),
  ...['local.ts', 'processor.ts', 'openapi.ts'].map((name) => join(root, 'bin', name)),
];

function variablesRead(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const pattern of READS) {
      for (const match of text.matchAll(pattern)) {
        const name = match[1] as string;
        if (!found.has(name)) found.set(name, relative(root, file));
      }
    }
  }
  return found;
}

describe('the local settings', () => {
  it('finds the variables where the code reads them', () => {
    const read = variablesRead();
    for (const name of ['PORT', 'PROCESSOR_PORT', 'SETTLEMENT_VISIBILITY_SECONDS', 'IDEMPOTENCY_TABLE', 'MAILER_URL']) {
      expect(read.has(name)).toBe(true);
    }
  });

  it('are every one documented in the README or a page under docs/', () => {
    const undocumented = [...variablesRead()]
      .filter(([name]) => !SET_BY_THE_STACK.has(name) && !DEPLOYED_ONLY.has(name))
      .filter(([name]) => !readme.includes(`\`${name}\``))
      .map(([name, file]) => `${name} (read in ${file})`);
    expect(undocumented).toEqual([]);
  });
});
