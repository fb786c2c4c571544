// Prints {"<Name>": "<0x creation bytecode>", ...} of the MetaMask Delegation Framework contracts named on the
// command line, as npm `@metamask/delegation-abis` ships them (unmodified), for the test suite to deploy on anvil.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const bytecode = require('@metamask/delegation-abis/bytecode');
const out = {};
for (const name of process.argv.slice(2)) {
  if (typeof bytecode[name] !== 'string') {
    console.error(`@metamask/delegation-abis ships no bytecode named ${name}`);
    process.exit(1);
  }
  out[name] = bytecode[name];
}
process.stdout.write(JSON.stringify(out));
