/**
 * Prints the payments API's OpenAPI 3.1 document: `npm run openapi > openapi.json`. The same document the local
 * stack serves at /openapi.json, generated from the handlers' schemas. Its first server is `API_URL` when set,
 * described as the URL it was given (this script can't know what runs there), else the local stack on its default
 * port.
 */
import { openApiDocument } from '../lib/openapi/document';

const apiUrl = process.env.API_URL;
const server = apiUrl
  ? { serverUrl: apiUrl, serverDescription: 'The API at API_URL, as given when this document was printed' }
  : { serverUrl: 'http://127.0.0.1:3000', serverDescription: 'The local stack (npm start) on its default port' };
process.stdout.write(`${JSON.stringify(openApiDocument(server), null, 2)}\n`);
