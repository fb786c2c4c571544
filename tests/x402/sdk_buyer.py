"""An x402 buyer built with the official x402 Python SDK (PyPI `x402`), for the selling tests (§23).

Usage:
    python sdk_buyer.py pay <url> <private_key> <network>
    python sdk_buyer.py sign <url> <private_key> <network>

`pay` requests <url> through the SDK's `requests` adapter (`x402HTTPAdapter` over `x402ClientSync` with the exact EVM
scheme and an eth_account key): a 402 is read, paid with a signed EIP-3009 authorization in `PAYMENT-SIGNATURE`, and
the request sent again, all by the SDK. Prints one JSON line: the final answer's `status`, `headers` (lower-case
names), `body` (text), the `payment_signature` header the SDK sent (null when it paid nothing) and the decoded
`payment_response` (null when there was none).

`sign` requests <url> once without paying, lets the SDK build the payment for its 402 and prints it without sending
it: `{"payment_required": <the decoded 402>, "payment_signature": <the header value>}`. The tests alter such a
payment to build the ones a seller must refuse.

Spend controls are off: the tests choose the prices and assets; the SDK's own checks are not under test here.
"""

import json
import sys

import requests
from eth_account import Account
from x402 import x402ClientSync
from x402.http import x402HTTPClientSync
from x402.http.clients import x402_http_adapter
from x402.http.utils import decode_payment_response_header
from x402.mechanisms.evm.exact import ExactEvmClientScheme


def client(private_key: str, network: str) -> x402ClientSync:
    x402 = x402ClientSync()
    x402.register(network, ExactEvmClientScheme(Account.from_key(private_key)))
    x402.set_spend_controls(False)
    return x402


def pay(url: str, private_key: str, network: str) -> dict:
    session = requests.Session()
    adapter = x402_http_adapter(client(private_key, network))
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    response = session.get(url, timeout=120)
    sent = response.request.headers.get("PAYMENT-SIGNATURE")
    header = response.headers.get("PAYMENT-RESPONSE")
    payment_response = None
    if header:
        payment_response = decode_payment_response_header(header).model_dump(by_alias=True, exclude_none=True)
    return {
        "status": response.status_code,
        "headers": {k.lower(): v for k, v in response.headers.items()},
        "body": response.text,
        "payment_signature": sent,
        "payment_response": payment_response,
    }


def sign(url: str, private_key: str, network: str) -> dict:
    response = requests.get(url, timeout=60)
    if response.status_code != 402:
        raise SystemExit(f"expected a 402 from {url}, got {response.status_code}: {response.text}")
    http = x402HTTPClientSync(client(private_key, network))
    body = None
    try:
        body = response.json()
    except ValueError:
        pass
    required = http.get_payment_required_response(response.headers.get, body)
    payload = http.create_payment_payload(required)
    headers = http.encode_payment_signature_header(payload)
    return {
        "payment_required": required.model_dump(by_alias=True, exclude_none=True),
        "payment_signature": headers["PAYMENT-SIGNATURE"],
    }


def main() -> None:
    mode, url, private_key, network = sys.argv[1:5]
    result = {"pay": pay, "sign": sign}[mode](url, private_key, network)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
