/** Jest's `postgres` project (jest.config.js): the end-to-end fixture starts its stacks on PostgreSQL. */
process.env.E2E_STORE = 'postgres';
