// @ts-check
/**
 * A Stryker ignorer: the text of an error's message (a string, a template or a `+` of them passed to `new ...Error`)
 * is not mutated. What a message says is for the person reading it; no store contract promises its wording, and a
 * suite that pinned every sentence would fail every store that words one otherwise. What the error carries (its
 * class, its key, the record it met, its cause) is mutated like any other code. The report counts these mutants as
 * ignored, apart from the score.
 */
import { declareValuePlugin, PluginKind } from '@stryker-mutator/api/plugin';

/** @param {any} node */
const isText = (node) =>
  node.type === 'StringLiteral' ||
  node.type === 'TemplateLiteral' ||
  (node.type === 'BinaryExpression' && node.operator === '+' && isText(node.left) && isText(node.right));

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'error-messages', {
    /** @param {any} path */
    shouldIgnore(path) {
      const parent = path.parentPath?.node;
      if (path.listKey !== 'arguments' || parent?.type !== 'NewExpression') return undefined;
      if (parent.callee.type !== 'Identifier' || !parent.callee.name.endsWith('Error')) return undefined;
      return isText(path.node) ? "an error message's text: no contract promises its wording" : undefined;
    },
  }),
];
