"""A seller built with the official x402 Python SDK (PyPI `x402`) that sells through agentd (§23).

Usage: python sdk_seller.py <facilitator_url> <facilitator_token> <pay_to> <price> <network>

Serves `GET /report` behind the SDK's Flask payment middleware (protocol v2) for <price> (e.g. `$0.01`: the network's
default USDC) paid to <pay_to>. The resource server's facilitator is the SDK's own `HTTPFacilitatorClientSync`
pointed at <facilitator_url> (`<agentd>/api/agents/{id}/x402`), with `Authorization: Bearer <facilitator_token>` on
its verify, settle and supported requests through the client's auth provider: agentd verifies and settles, nothing
else does. The middleware asks the facilitator's `/supported` when it starts (and exits the process when that
fails, as the SDK does). Prints `listening on <port>` once it accepts connections; exits when its standard input
closes (the test that started it ended).
"""

import os
import sys
import threading

from flask import Flask
from werkzeug.serving import make_server
from x402.http import AuthHeaders, FacilitatorConfig, HTTPFacilitatorClientSync
from x402.http.middleware.flask import PaymentMiddleware
from x402.http.types import PaymentOption, RouteConfig
from x402.mechanisms.evm.exact import ExactEvmServerScheme
from x402.server import x402ResourceServerSync


class BearerToken:
    """The SDK's `AuthProvider`: the facilitator token on each of the three endpoints."""

    def __init__(self, token: str) -> None:
        self._headers = {"Authorization": f"Bearer {token}"}

    def get_auth_headers(self) -> AuthHeaders:
        return AuthHeaders(
            verify=dict(self._headers),
            settle=dict(self._headers),
            supported=dict(self._headers),
        )


def main() -> None:
    facilitator_url, token, pay_to, price, network = sys.argv[1:6]
    facilitator = HTTPFacilitatorClientSync(
        FacilitatorConfig(url=facilitator_url, timeout=120.0, auth_provider=BearerToken(token))
    )
    server = x402ResourceServerSync(facilitator)
    server.register(network, ExactEvmServerScheme())

    app = Flask(__name__)

    @app.get("/report")
    def report():
        return {"report": "quarterly numbers"}

    routes = {
        "GET /report": RouteConfig(
            accepts=PaymentOption(scheme="exact", pay_to=pay_to, price=price, network=network),
            description="a quarterly report",
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
