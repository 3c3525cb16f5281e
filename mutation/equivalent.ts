/**
 * Mutants no test can kill because they change nothing a caller of the store can see: each named by its file, the
 * mutator, the source it replaces and what it puts in its place (line numbers move; the text rarely does), with
 * the reason. The report (mutation/report.ts) counts a survivor matching one as equivalent, and lists every entry
 * that matches no survivor any more, so that the list never outlives the code it speaks of.
 */
export interface Equivalent {
  /** Repository-relative path of the mutated file. */
  readonly file: string;
  /** Stryker's mutator name (`ConditionalExpression`, `StringLiteral`, ...). */
  readonly mutator: string;
  /** The mutated source, exactly as in the file. */
  readonly original: string;
  /** What the mutant puts in its place, exactly as Stryker reports it. */
  readonly replacement: string;
  /** Why no behaviour changes. */
  readonly reason: string;
}

export const equivalents: readonly Equivalent[] = [
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'ConditionalExpression',
    original: 'effects.length === 0',
    replacement: 'false',
    reason:
      "A checkpoint without effects sent through the transaction path instead: the same write, its fence mapped the same way (the completion step's failure is fenced()); only the transaction's bounds statement is sent besides, in the same round trip when the pool pipelines.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'BlockStatement',
    original:
      "{\n      try {\n        await this.db.query(write);\n        return { kind: 'written' } as const;\n      } catch (error) {\n        return fenced(error);\n      }\n    }",
    replacement: '{}',
    reason:
      "A checkpoint without effects sent through the transaction path instead: the same write, its fence mapped the same way (the completion step's failure is fenced()); only the transaction's bounds statement is sent besides, in the same round trip when the pool pipelines.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'BlockStatement',
    original: "{\n        await this.db.query(write);\n        return { kind: 'written' } as const;\n      }",
    replacement: '{}',
    reason:
      "A checkpoint without effects sent through the transaction path instead: the same write, its fence mapped the same way (the completion step's failure is fenced()); only the transaction's bounds statement is sent besides, in the same round trip when the pool pipelines.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'ConditionalExpression',
    original: 'recoverAt === undefined',
    replacement: 'false',
    reason:
      "endLease's statement (statements.ts) tests each change against undefined: a member present as undefined is one left out.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'ConditionalExpression',
    original: 'expiresAt === undefined',
    replacement: 'false',
    reason:
      "endLease's statement (statements.ts) tests each change against undefined: a member present as undefined is one left out.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'ConditionalExpression',
    original: 'row?.written',
    replacement: 'false',
    reason:
      "A written claim then comes back as met with the record it wrote, which carries this claim's own lease token: the driver store reads that as its own write (seenOf, as for a reply lost and sent again), acquired either way.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'ConditionalExpression',
    original: 'failed.step >= effectsFrom',
    replacement: 'true',
    reason:
      "The steps before the effects are the bounds (set_config, which raises no integrity error or expectRows check) and the key's own write, whose failure is handled before this call; effectConditionFailure answers undefined for any other error, and the error is thrown as it is.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/statements.ts',
    mutator: 'ConditionalExpression',
    original: "column !== 'scope' && column !== 'key'",
    replacement: 'true',
    reason:
      "The conflict target (scope, key) set to the values it already has: ON CONFLICT's EXCLUDED row and the UPDATE's WHERE both carry the same scope and key, so assigning them changes nothing.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/statements.ts',
    mutator: 'ConditionalExpression',
    original: "column !== 'scope'",
    replacement: 'true',
    reason:
      "The conflict target (scope, key) set to the values it already has: ON CONFLICT's EXCLUDED row and the UPDATE's WHERE both carry the same scope and key, so assigning them changes nothing.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/statements.ts',
    mutator: 'ConditionalExpression',
    original: "column !== 'key'",
    replacement: 'true',
    reason:
      "The conflict target (scope, key) set to the values it already has: ON CONFLICT's EXCLUDED row and the UPDATE's WHERE both carry the same scope and key, so assigning them changes nothing.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/statements.ts',
    mutator: 'StringLiteral',
    original: "'scope'",
    replacement: '""',
    reason:
      "The conflict target (scope, key) set to the values it already has: ON CONFLICT's EXCLUDED row and the UPDATE's WHERE both carry the same scope and key, so assigning them changes nothing.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/statements.ts',
    mutator: 'StringLiteral',
    original: "'key'",
    replacement: '""',
    reason:
      "The conflict target (scope, key) set to the values it already has: ON CONFLICT's EXCLUDED row and the UPDATE's WHERE both carry the same scope and key, so assigning them changes nothing.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/statements.ts',
    mutator: 'MethodExpression',
    original:
      "COLUMNS.split(', ')\n    .map((column, index) => ({ column, index }))\n    .filter(({ column }) => column !== 'scope' && column !== 'key')",
    replacement: "COLUMNS.split(', ').map((column, index) => ({\n  column,\n  index\n}))",
    reason:
      "The conflict target (scope, key) set to the values it already has: ON CONFLICT's EXCLUDED row and the UPDATE's WHERE both carry the same scope and key, so assigning them changes nothing.",
  },
  {
    file: 'packages/keystone-idempotency/src/postgres/driver.ts',
    mutator: 'ConditionalExpression',
    original: 'statementMs === undefined',
    replacement: 'false',
    reason:
      'transactionBounds (statements.ts) tests statementMs against undefined: present as undefined, it is left out, and the session keeps its own statement_timeout.',
  },
];
