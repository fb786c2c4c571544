#!/usr/bin/env node
// An x402 buyer built on the official npm SDK (@x402/fetch, @x402/core, @x402/evm with a viem account), for agentd's
// selling tests (§23): a second implementation of the buyer's side, independent of the Python SDK's.
//
//   node test-tools/x402-buyer.mjs URL PRIVATE_KEY NETWORK
//
// GETs URL through `wrapFetchWithPayment` (an `x402Client` with the exact EVM scheme registered for NETWORK, e.g.
// `eip155:8453`): a 402 is read, paid with a signed EIP-3009 authorization in `PAYMENT-SIGNATURE` and the request
// sent again, all by the SDK. Prints one JSON document on stdout: the final answer's {status, headers (lower-case
// names), body (text), payment_signature (the header the SDK sent, or null), payment_response (decoded, or null)}.
// Spend controls are off: the tests choose prices and assets. A failure prints {error} and exits 1.

import { wrapFetchWithPayment, x402Client, decodePaymentResponseHeader } from '@x402/fetch';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { privateKeyToAccount } from 'viem/accounts';

const [url, privateKey, network] = process.argv.slice(2);
if (!url || !privateKey || !network) {
  console.error('usage: node x402-buyer.mjs URL PRIVATE_KEY NETWORK');
  process.exit(2);
}

try {
  const account = privateKeyToAccount(privateKey.startsWith('0x') ? privateKey : `0x${privateKey}`);
  const client = new x402Client();
  client.register(network, new ExactEvmScheme(account));
  client.setSpendControls(false);

  // The fetch the SDK wraps, recording the payment header of the request it sends.
  let paymentSignature = null;
  const recordingFetch = async (request, init) => {
    const sent = new Request(request, init);
    paymentSignature = sent.headers.get('PAYMENT-SIGNATURE') ?? paymentSignature;
    return fetch(sent);
  };
  const paying = wrapFetchWithPayment(recordingFetch, client);
  const response = await paying(url, { method: 'GET' });
  const headers = {};
  response.headers.forEach((value, name) => {
    headers[name.toLowerCase()] = value;
  });
  const header = response.headers.get('PAYMENT-RESPONSE');
  console.log(
    JSON.stringify({
      status: response.status,
      headers,
      body: await response.text(),
      payment_signature: paymentSignature,
      payment_response: header ? decodePaymentResponseHeader(header) : null,
    }),
  );
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.stack ?? error) }));
  process.exit(1);
}
