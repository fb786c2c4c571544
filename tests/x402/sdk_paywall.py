"""A paid resource built with the official x402 Python SDK (PyPI `x402`), for the interoperability test.

Usage: python sdk_paywall.py <rpc_url> <facilitator_private_key> <pay_to> <price>

Serves `GET /weather` behind the SDK's Flask payment middleware (protocol v2), with the SDK's own facilitator in
process (`x402FacilitatorSync` + the exact EVM scheme over `FacilitatorWeb3Signer`) settling on the given node, so
nothing outside this machine is called. Prints `listening on <port>` once it accepts connections; exits when its
standard input closes (the test that started it ended).
"""

import os
import sys
import threading

from flask import Flask
from werkzeug.serving import make_server
from x402 import x402FacilitatorSync
from x402.http.middleware.flask import PaymentMiddleware
from x402.http.types import PaymentOption, RouteConfig
from x402.mechanisms.evm import FacilitatorWeb3Signer
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, ExactEvmServerScheme
from x402.server import x402ResourceServerSync

NETWORK = "eip155:8453"


def main() -> None:
    rpc_url, facilitator_key, pay_to, price = sys.argv[1:5]
    facilitator = x402FacilitatorSync()
    signer = FacilitatorWeb3Signer(private_key=facilitator_key, rpc_url=rpc_url)
    facilitator.register([NETWORK], ExactEvmFacilitatorScheme(signer))
    server = x402ResourceServerSync(facilitator)
    server.register(NETWORK, ExactEvmServerScheme())

    app = Flask(__name__)

    @app.get("/weather")
    def weather():
        return {"weather": "sunny"}

    routes = {
        "GET /weather": RouteConfig(
            accepts=PaymentOption(scheme="exact", pay_to=pay_to, price=price, network=NETWORK),
            description="today's weather",
            mime_type="application/json",
        )
    }
    PaymentMiddleware(app, routes, server)

    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    print(f"listening on {httpd.server_port}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
