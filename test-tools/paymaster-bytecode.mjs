// Prints {"SingletonPaymasterV7": "<0x creation bytecode>"}: Pimlico's SingletonPaymaster v0.7 as npm
// `@pimlico/mock-paymaster` 0.0.7 ships it (unmodified), for the test suite to deploy on anvil with constructor
// arguments of its own. The creation code is the hex literal that opens `getSingletonPaymaster07InitCode` in the
// package's `constants.ts`, read as text (the package's own code, and viem, are not run).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The package exports neither `package.json` nor `constants.ts`: read it where `npm ci` in test-tools puts it.
const root = join(dirname(fileURLToPath(import.meta.url)), 'node_modules/@pimlico/mock-paymaster');
const text = readFileSync(join(root, 'constants.ts'), 'utf8');
const start = text.indexOf('export const getSingletonPaymaster07InitCode');
if (start < 0) {
  console.error('@pimlico/mock-paymaster: constants.ts has no getSingletonPaymaster07InitCode');
  process.exit(1);
}
const literal = /"(0x[0-9a-fA-F]+)"/.exec(text.slice(start));
if (!literal || literal[1].length < 1000) {
  console.error('@pimlico/mock-paymaster: no creation code in getSingletonPaymaster07InitCode');
  process.exit(1);
}
process.stdout.write(JSON.stringify({ SingletonPaymasterV7: literal[1].toLowerCase() }));
