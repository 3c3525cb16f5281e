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

export const equivalents: readonly Equivalent[] = [];
