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
//
//   node test-tools/x402-buyer.mjs facilitate FACILITATOR_URL TOKEN PAYMENT_SIGNATURE
//
// The other side of a sale, as a resource server built on the npm SDK talks to its facilitator: the SDK's
// `HTTPFacilitatorClient` (from @x402/core/server) pointed at FACILITATOR_URL (`<agentd>/api/agents/{id}/x402`), with
// `Authorization: Bearer TOKEN` from its `createAuthHeaders`, asks `getSupported()`, then `verify()` and `settle()`
// the payment PAYMENT_SIGNATURE (a `PAYMENT-SIGNATURE` header value; its `accepted` entry as the requirements).
// Prints {supported, verify, settle} as the SDK parsed them (its zod schemas reject a malformed answer).

import { wrapFetchWithPayment, x402Client, decodePaymentResponseHeader } from '@x402/fetch';
import { decodePaymentSignatureHeader } from '@x402/core/http';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { privateKeyToAccount } from 'viem/accounts';

if (process.argv[2] === 'facilitate') {
  const [facilitatorUrl, token, paymentSignature] = process.argv.slice(3);
  try {
    const auth = { Authorization: `Bearer ${token}` };
    const facilitator = new HTTPFacilitatorClient({
      url: facilitatorUrl,
      createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
    });
    const payment = decodePaymentSignatureHeader(paymentSignature);
    const supported = await facilitator.getSupported();
    const verify = await facilitator.verify(payment, payment.accepted);
    const settle = await facilitator.settle(payment, payment.accepted);
    console.log(JSON.stringify({ supported, verify, settle }));
  } catch (error) {
    console.log(JSON.stringify({ error: String(error?.stack ?? error) }));
    process.exit(1);
  }
  process.exit(0);
}

const [url, privateKey, network] = process.argv.slice(2);
if (!url || !privateKey || !network) {
  console.error('usage: node x402-buyer.mjs URL PRIVATE_KEY NETWORK | facilitate FACILITATOR_URL TOKEN PAYMENT_SIGNATURE');
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
