import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { HeaderObject, OpenAPIObject, ReferenceObject, ResponseObject } from 'openapi3-ts/oas31';

/** Where the document is registered in Ajv, so `$ref`s into it resolve (`openapi.json#/components/...`). */
const DOCUMENT_ID = 'https://keystone-idempotency.dev/openapi.json';

/** The top-level members of an OpenAPI document: known to Ajv so that strict mode accepts the document as a root. */
const OPENAPI_MEMBERS = ['openapi', 'info', 'servers', 'paths', 'components', 'security', 'tags', 'webhooks'];

/**
 * Checks real HTTP responses against the OpenAPI document: the status is documented for the operation, every
 * required header is present and every documented header that is present has a valid value, the media type is one
 * the response documents, and the body validates against its schema (Ajv, JSON Schema 2020-12, formats checked).
 *
 * Throws an error that names the operation, the status and what was wrong, with the body, so a failing e2e test
 * shows exactly how the response left the contract.
 */
export class OpenApiContract {
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(private readonly document: OpenAPIObject) {
    this.ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(this.ajv);
    for (const member of OPENAPI_MEMBERS) this.ajv.addKeyword(member);
    this.ajv.addSchema({ ...document, $id: DOCUMENT_ID });
  }

  /** Every schema in the document, compiled: Ajv validates each against the 2020-12 meta-schema as it compiles. */
  compileAll(): string[] {
    const pointers: string[] = [];
    for (const name of Object.keys(this.document.components?.schemas ?? {})) {
      pointers.push(`#/components/schemas/${name}`);
    }
    for (const [path, item] of Object.entries(this.document.paths ?? {})) {
      for (const [method, operation] of Object.entries(item)) {
        if (typeof operation !== 'object' || operation === null || !('responses' in operation)) continue;
        for (const [status, response] of Object.entries(operation.responses as Record<string, ResponseObject>)) {
          for (const mediaType of Object.keys(response.content ?? {})) {
            pointers.push(
              `#/paths/${pointerSegment(path)}/${method}/responses/${status}/content/${pointerSegment(mediaType)}/schema`,
            );
          }
        }
      }
    }
    for (const pointer of pointers) this.validator(pointer);
    return pointers;
  }

  /** Checks one response; the response itself is left unread (its clone is consumed). */
  async check(operation: `${'GET' | 'POST'} ${string}`, response: Response): Promise<void> {
    const [method = '', path = ''] = operation.split(' ');
    const name = `${operation} answered ${response.status}`;
    const documented = this.document.paths?.[path]?.[method.toLowerCase() as 'get' | 'post']?.responses as
      | Record<string, ResponseObject>
      | undefined;
    if (!documented) throw new Error(`${operation} is not in the OpenAPI document`);
    const spec = documented[String(response.status)];
    const text = await response.clone().text();
    if (!spec) throw new Error(`${name}, which the document does not list (${Object.keys(documented)}): ${text}`);

    for (const [header, headerSpec] of Object.entries(spec.headers ?? {})) {
      this.checkHeader(name, header, this.resolve<HeaderObject>(headerSpec), response.headers.get(header));
    }

    const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
    const content = spec.content ?? {};
    if (Object.keys(content).length === 0) {
      if (text !== '') throw new Error(`${name} with a body, and the document describes none: ${text}`);
      return;
    }
    if (!(mediaType in content)) {
      throw new Error(`${name} as ${mediaType || 'no media type'}; the document says ${Object.keys(content)}`);
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`${name} with a body that is not JSON: ${text}`);
    }
    const validate = this.validator(
      `#/paths/${pointerSegment(path)}/${method.toLowerCase()}/responses/${response.status}/content/${pointerSegment(mediaType)}/schema`,
    );
    if (!validate(body)) {
      throw new Error(`${name} with a body outside its schema: ${this.ajv.errorsText(validate.errors)}\n${text}`);
    }
  }

  private checkHeader(name: string, header: string, spec: HeaderObject, value: string | null): void {
    if (value === null) {
      if (spec.required) throw new Error(`${name} without its required ${header} header`);
      return;
    }
    const schema = (spec.schema ?? {}) as { type?: string };
    // Header values are text; a simple-style integer header is its digits.
    const typed = schema.type === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value;
    const validate = this.ajv.compile(schema);
    if (!validate(typed)) {
      throw new Error(`${name} with ${header}: ${value}, outside its schema: ${this.ajv.errorsText(validate.errors)}`);
    }
  }

  private validator(pointer: string): ValidateFunction {
    let validate = this.validators.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${DOCUMENT_ID}${pointer}` });
      this.validators.set(pointer, validate);
    }
    return validate;
  }

  private resolve<T>(value: T | ReferenceObject): T {
    if (typeof value !== 'object' || value === null || !('$ref' in value)) return value as T;
    const parts = value.$ref.replace(/^#\//, '').split('/').map(fromPointerSegment);
    return parts.reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], this.document) as T;
  }
}

/** A JSON pointer segment: `~` and `/` escaped (RFC 6901), then percent-encoded for use in a URI fragment. */
function pointerSegment(segment: string): string {
  return encodeURIComponent(segment.replace(/~/g, '~0').replace(/\//g, '~1'));
}

function fromPointerSegment(segment: string): string {
  return decodeURIComponent(segment).replace(/~1/g, '/').replace(/~0/g, '~');
}
