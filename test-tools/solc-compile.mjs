// Compiles Solidity sources for the test suite with solc-js (no download: the compiler is the npm package).
// Usage: node solc-compile.mjs <source.sol> <ContractName>
// Prints JSON {"bytecode": "0x…", "abi": [...]} on stdout. Imports of `@openzeppelin/...` are read from this
// directory's node_modules; relative imports from the source's own directory.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import solc from 'solc';

const here = dirname(fileURLToPath(import.meta.url));
const [sourcePath, contractName] = process.argv.slice(2);
if (!sourcePath || !contractName) {
  console.error('usage: node solc-compile.mjs <source.sol> <ContractName>');
  process.exit(2);
}
const sourceDir = dirname(resolve(sourcePath));
const key = sourcePath.split('/').pop();

function findImports(path) {
  const file = path.startsWith('@') ? join(here, 'node_modules', path) : join(sourceDir, path);
  try {
    return { contents: readFileSync(file, 'utf8') };
  } catch {
    return { error: `not found: ${path}` };
  }
}

const input = {
  language: 'Solidity',
  sources: { [key]: { content: readFileSync(sourcePath, 'utf8') } },
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: 'cancun',
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (output.errors || []).filter((e) => e.severity === 'error');
if (errors.length > 0) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const contract = output.contracts?.[key]?.[contractName];
if (!contract) {
  console.error(`no contract ${contractName} in ${sourcePath}`);
  process.exit(1);
}
process.stdout.write(JSON.stringify({ bytecode: `0x${contract.evm.bytecode.object}`, abi: contract.abi }));
