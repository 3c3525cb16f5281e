import type { ProblemDetails } from './problem.js';

/**
 * An error that already knows its HTTP answer. Like middy's HttpError, `expose` is true below 500: only then are
 * its title and detail shown to the client. A 5xx is answered with a generic body whatever it carries.
 */
export class HttpProblem extends Error {
  readonly status: number;
  /**
   * A full `type` URI, or a slug (the adapter's `ProblemType` or a service's own) that `problemErrorHandler`
   * writes under the service's base.
   */
  readonly type: string;
  readonly title: string;
  readonly detail: string | undefined;
  readonly headers: Record<string, string>;
  readonly extensions: Record<string, unknown>;
  readonly expose: boolean;

  constructor(
    status: number,
    type: string,
    title: string,
    options: {
      detail?: string;
      headers?: Record<string, string>;
      extensions?: Record<string, unknown>;
      cause?: unknown;
    } = {},
  ) {
    super(options.detail ?? title, { cause: options.cause });
    this.name = 'HttpProblem';
    this.status = status;
    this.type = type;
    this.title = title;
    this.detail = options.detail;
    this.headers = options.headers ?? {};
    this.extensions = options.extensions ?? {};
    this.expose = status < 500;
  }

  toProblem(): ProblemDetails {
    return {
      ...this.extensions,
      type: this.type,
      title: this.title,
      status: this.status,
      ...(this.detail ? { detail: this.detail } : {}),
    };
  }
}
