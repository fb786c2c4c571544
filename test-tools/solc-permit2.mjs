// Compiles Uniswap's Permit2, unmodified, from the source npm ships it in (@uniswap/v4-periphery's lib/permit2), with
// the compiler and settings its own build names (solc 0.8.17, via-IR, 1,000,000 optimizer runs).
// Usage: node solc-permit2.mjs — prints JSON {"bytecode": "0x…"} on stdout.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import solc from 'solc-0817';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, 'node_modules/@uniswap/v4-periphery/lib/permit2');

// Its imports: relative ones (solc hands them over resolved against the source's own path) and solmate's.
function findImports(path) {
  const file = path.startsWith('solmate/') ? join(root, 'lib/solmate', path.slice('solmate/'.length)) : join(root, path);
  try {
    return { contents: readFileSync(file, 'utf8') };
  } catch {
    return { error: `not found: ${path}` };
  }
}

const input = {
  language: 'Solidity',
  sources: { 'src/Permit2.sol': { content: readFileSync(join(root, 'src/Permit2.sol'), 'utf8') } },
  settings: {
    optimizer: { enabled: true, runs: 1000000 },
    viaIR: true,
    outputSelection: { '*': { '*': ['evm.bytecode.object'] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (output.errors || []).filter((e) => e.severity === 'error');
if (errors.length > 0) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const bytecode = output.contracts?.['src/Permit2.sol']?.Permit2?.evm?.bytecode?.object;
if (!bytecode) {
  console.error('no Permit2 in the output');
  process.exit(1);
}
process.stdout.write(JSON.stringify({ bytecode: `0x${bytecode}` }));
