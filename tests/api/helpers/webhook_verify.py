"""Verifies webhook deliveries with the official Standard Webhooks library (PyPI `standardwebhooks`).

Reads one JSON object per line on stdin: {"secret": "whsec_...", "headers": {...}, "body": "<raw body>"}; writes
one JSON object per line: {"ok": true, "payload": <the verified, parsed body>} or {"ok": false, "error": "..."}.
"""
import json
import sys

from standardwebhooks.webhooks import Webhook

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    item = json.loads(line)
    try:
        payload = Webhook(item["secret"]).verify(item["body"], item["headers"])
        print(json.dumps({"ok": True, "payload": payload}))
    except Exception as e:  # noqa: BLE001 - any refusal is reported to the test
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
    sys.stdout.flush()
