import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/**
 * The documents a team reads, checked as code is: every relative link in the READMEs and `docs/` names a file that
 * exists (and, with a `#...` anchor into a Markdown file, a heading of it, by GitHub's slug rule), and every
 * TypeScript block compiles. The blocks are compiled in one program with the repository's compiler options, so
 * `keystone-idempotency/*` resolves to the sources as tsconfig.json's `customConditions` say. A block that is not a whole
 * program opens with ```ts fragment and is left out. The `ts` blocks of the files `test/package/pack.test.ts`
 * already compiles against the packed package (both READMEs, the migration guide) are left to it; their
 * `typescript` blocks (Powertools' side of the guide) are compiled here.
 */
jest.setTimeout(120_000);

const root = resolve(__dirname, '..', '..');
const documents = [
  'README.md',
  'packages/keystone-idempotency/README.md',
  'bench/README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];
/** Whose `ts` blocks the pack test compiles, against the tarball, under two resolutions. */
const COMPILED_BY_THE_PACK_TEST = new Set([
  'README.md',
  'packages/keystone-idempotency/README.md',
  'docs/migrating-from-powertools.md',
]);

/** Names the examples use without defining: stand-ins for the reader's own code. */
const EXAMPLE_GLOBALS = `declare global {
  const carrier: { book(order: unknown, options: { idempotencyKey: string }): Promise<{ id: string }> };
  const processor: {
    charge(
      order: { amount: number; currency: string },
      options: { idempotencyKey: string },
    ): Promise<{ id: string; amount: number }>;
  };
  function ship(order: unknown): Promise<unknown>;
  const KEY: string;
  const controller: AbortController;
}
export {};
`;

interface Fence {
  readonly info: string;
  readonly body: string;
  readonly line: number;
}

/** The text outside fenced code blocks (blank lines in their place, so line numbers hold), and the blocks. */
function split(markdown: string): { prose: string; fences: Fence[] } {
  const prose: string[] = [];
  const fences: Fence[] = [];
  let open: { info: string; start: number; lines: string[]; marker: string } | undefined;
  for (const [index, line] of markdown.split('\n').entries()) {
    if (open) {
      if (line.trim() === open.marker) {
        fences.push({ info: open.info, body: open.lines.join('\n'), line: open.start + 1 });
        open = undefined;
      } else open.lines.push(line);
      prose.push('');
      continue;
    }
    const fence = /^\s*(`{3,}|~{3,})(.*)$/.exec(line);
    if (fence) {
      open = { info: (fence[2] ?? '').trim(), start: index, lines: [], marker: fence[1] ?? '```' };
      prose.push('');
    } else prose.push(line);
  }
  return { prose: prose.join('\n'), fences };
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, text] of split(markdown).prose.matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const slug = (text ?? '')
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Every link target in the prose: `[text](target)` and `![alt](target)`, outside inline code. */
function linksOf(markdown: string): { target: string; line: number }[] {
  const lines = split(markdown).prose.split('\n');
  return lines.flatMap((line, index) =>
    [...line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => ({
      target: match[1] ?? '',
      line: index + 1,
    })),
  );
}

/** Where GitHub shows a file of this repository: the package README links there. */
const REPOSITORY_BLOB = 'https://github.com/keystone-idempotency/keystone-idempotency/blob/main/';

const text = new Map(documents.map((doc) => [doc, readFileSync(join(root, doc), 'utf8')]));

describe('the documents', () => {
  it('are the READMEs and the pages under docs/', () => {
    expect(documents).toEqual(expect.arrayContaining(['README.md', 'docs/protocol.md', 'docs/local-stack.md']));
  });

  it('keep the root README short: at most 15 KB', () => {
    expect(Buffer.byteLength(text.get('README.md') ?? '')).toBeLessThanOrEqual(15 * 1024);
  });

  it.each(documents)(
    '%s: every link into this repository names a file that exists, and a heading that exists',
    (doc) => {
      const broken: string[] = [];
      const links = linksOf(text.get(doc) ?? '');
      for (const { target, line } of links) {
        // The package README's links into the repository are absolute (npm resolves no relative link): checked too.
        const inRepository = target.startsWith(REPOSITORY_BLOB) ? target.slice(REPOSITORY_BLOB.length) : undefined;
        if (inRepository === undefined && /^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: and the like
        const [path = '', anchor] = (inRepository ?? target).split('#');
        const file =
          inRepository !== undefined
            ? join(root, decodeURIComponent(path))
            : path === ''
              ? join(root, doc)
              : resolve(dirname(join(root, doc)), decodeURIComponent(path));
        if (!existsSync(file)) {
          broken.push(`${doc}:${line} ${target}: no such file`);
          continue;
        }
        if (anchor !== undefined && file.endsWith('.md')) {
          const heading = decodeURIComponent(anchor);
          if (!anchorsOf(readFileSync(file, 'utf8')).has(heading)) {
            broken.push(`${doc}:${line} ${target}: no heading #${heading} in ${relative(root, file)}`);
          }
        }
      }
      expect(broken).toEqual([]);
    },
  );

  it('find links and anchors as GitHub does (the check can fail)', () => {
    const sample =
      '# A `code` title, and (parens)!\n\n## Twice\n\n## Twice\n\n[x](other.md#twice-1) `[y](not-a-link)`\n';
    expect([...anchorsOf(sample)]).toEqual(['a-code-title-and-parens', 'twice', 'twice-1']);
    expect(linksOf(sample).map((link) => link.target)).toEqual(['other.md#twice-1']);
    expect(linksOf('```\n[z](inside-a-fence.md)\n```\n')).toEqual([]);
  });
});

describe('the TypeScript blocks of the documents', () => {
  const dir = join(root, 'node_modules', '.cache', 'keystone-doc-blocks');
  const blocks = documents.flatMap((doc) =>
    split(text.get(doc) ?? '')
      .fences.filter(({ info }) => /^(ts|typescript)\b/.test(info) && !/\bfragment\b/.test(info))
      .filter(({ info }) => !(COMPILED_BY_THE_PACK_TEST.has(doc) && /^ts\b/.test(info)))
      .map((fence) => ({ doc, ...fence })),
  );

  it('compile, every one, in one program with the repository compiler options', () => {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const globals = join(dir, 'example-globals.d.ts');
    writeFileSync(globals, EXAMPLE_GLOBALS);
    /** Each block as a module of its own (`export {}`), so two blocks' top-level names never collide. */
    const files = new Map(
      blocks.map((block) => {
        const file = join(dir, `${block.doc.replace(/[/.]/g, '-')}-line-${block.line}.ts`);
        writeFileSync(file, `${block.body}\nexport {};\n`);
        return [file, block] as const;
      }),
    );
    const config = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
    const program = ts.createProgram({ rootNames: [globals, ...files.keys()], options: { ...options, noEmit: true } });
    const errors = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      const block = diagnostic.file && files.get(resolve(diagnostic.file.fileName));
      if (!block || !diagnostic.file || diagnostic.start === undefined) return message;
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      return `${block.doc}:${block.line + line + 1}: ${message}`;
    });
    expect(errors).toEqual([]);
    expect(files.size).toBeGreaterThan(0);
  });
});
