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
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'ArrayDeclaration',
    original: '[]',
    replacement: '["Stryker was here"]',
    reason: "The read script's arguments: it takes none (`HGETALL KEYS[1]`), so one more is never read.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'EqualityOperator',
    original: 'i + 1 < reply.length',
    replacement: 'i + 1 <= reply.length',
    reason:
      "findDue's reply is ZRANGE ... WITHSCORES: member and score in pairs, an even length, so i (even) never reaches length - 1 where the two bounds differ.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'StringLiteral',
    original: "''",
    replacement: '"Stryker was here!"',
    reason:
      "Each `''` here is a fallback Redis never leaves to be used, or an argument read only beside another: the place script reads the seen status only when a lease token was seen (a fresh claim sends neither, scripts.ts PLACE); the server-settings script always returns two strings (`or ''` in Lua), so `policy ?? ''` and `aof ?? ''` never fall back; CONFIG GET appendfsync always answers with the parameter's value, so configValue's `?? ''` never falls back with Redis or Valkey. The same literal in the unreported-policy branch: see `policy === ''`.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'ConditionalExpression',
    original: "policy === ''",
    replacement: 'false',
    reason:
      'Unreachable with Redis and Valkey: INFO memory always reports maxmemory_policy, and the server-settings script matches every policy name. The branch words the refusal for a Redis-compatible server that reports none; not equivalent there, but no server the tests run has that behaviour, and a stand-in reply would test a mock, not a server. Counted against the score.',
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'StringLiteral',
    original:
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the mutated source, a template literal, as written
      '`the Redis server did not report its maxmemory-policy (INFO memory): set it to ${accepted} (on ElastiCache, in the `',
    replacement: '``',
    reason:
      "The refusal's wording for a server that reports no maxmemory_policy: unreachable with Redis and Valkey (see `policy === ''`). Counted against the score.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'StringLiteral',
    original: `"parameter group), then pass evictionCheck: 'skip'"`,
    replacement: '""',
    reason:
      "The refusal's wording for a server that reports no maxmemory_policy: unreachable with Redis and Valkey (see `policy === ''`). Counted against the score.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'StringLiteral',
    original: "'1'",
    replacement: '""',
    reason:
      "The value of the write WAIT follows: any value is a write that replication carries in order, '' as well as '1'.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'ConditionalExpression',
    original: "kind === 'met'",
    replacement: 'true',
    reason:
      "A reply that is neither written nor met is an effect's refusal (`['effect', index]`): its pairs carry no lease token, so the token test that follows fails for it as `kind === 'met'` did.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/driver.ts',
    mutator: 'ConditionalExpression',
    original: "kind === 'effect'",
    replacement: 'true',
    reason:
      'The scripts answer written, met or effect only (scripts.ts): the error for any other reply is never reached.',
  },
  {
    file: 'packages/keystone-idempotency/src/redis/effect.ts',
    mutator: 'StringLiteral',
    original: "'0'",
    replacement: '""',
    reason:
      "The ifAbsent flag is tested as `nx == '1'` by the commit script: '0' and '' both mean not ifAbsent, and incrBy and require never read it.",
  },
  {
    file: 'packages/keystone-idempotency/src/redis/effect.ts',
    mutator: 'StringLiteral',
    original: "''",
    replacement: '"Stryker was here!"',
    reason:
      "An operand the effect's kind never reads: the scripts read the second operand for hset only, and none for require (scripts.ts refusedEffect, writeEffects).",
  },
];
