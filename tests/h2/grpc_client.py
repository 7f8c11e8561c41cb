"""grpc_client.py - the Python grpcio client of tests/h2/grpc_test.py: one
call as its JSON argument says, its outcome as one JSON line on stdout
(status code name, details, elapsed seconds, messages received). Generic
calls on raw bytes (no generated code): the test's servers echo bytes.

spec keys: target, call (unary | stream | cancel | flood), deadline (s),
retry (a service config retryPolicy: maxAttempts 4, UNAVAILABLE), n (the
messages a stream asks for), tls ({"roots": PEM file or null for grpcio's
default roots, "name": the name to verify})."""
import json
import sys
import time

import grpc

SVC = "faultnet.test.Echo"
RETRY = {"methodConfig": [{"name": [{"service": SVC}], "retryPolicy": {
    "maxAttempts": 4, "initialBackoff": "0.05s", "maxBackoff": "0.2s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}


def channel(spec):
    opts = [("grpc.enable_retries", 1 if spec.get("retry") else 0)]
    if spec.get("retry"):
        opts.append(("grpc.service_config", json.dumps(RETRY)))
    if spec["call"] == "flood":
        # A ping every 20 ms, with or without calls: the server's ping
        # policy is what answers. (grpcio's core still spaces its own
        # pings a second apart: the server's third strike comes at ~3 s.)
        opts += [("grpc.keepalive_time_ms", 20), ("grpc.keepalive_timeout_ms", 5000),
                 ("grpc.keepalive_permit_without_calls", 1),
                 ("grpc.http2.max_pings_without_data", 0),
                 ("grpc.http2.min_time_between_pings_ms", 10)]
    tls = spec.get("tls")
    if not tls:
        return grpc.insecure_channel(spec["target"], options=opts)
    roots = open(tls["roots"], "rb").read() if tls.get("roots") else None
    opts.append(("grpc.ssl_target_name_override", tls["name"]))
    return grpc.secure_channel(spec["target"], grpc.ssl_channel_credentials(roots), options=opts)


def main():
    spec = json.loads(sys.argv[1])
    ch = channel(spec)
    out = {"code": "OK", "details": "", "got": 0}
    t0 = time.monotonic()
    try:
        if spec["call"] in ("unary", "flood"):
            msg = spec.get("payload", "ping").encode()
            r = ch.unary_unary("/%s/%s" % (SVC, spec.get("method", "Unary")))(
                msg, timeout=spec.get("deadline", 10))
            out["got"] = 1 if r == msg else -1
        elif spec["call"] == "stream":
            for m in ch.unary_stream("/%s/Stream" % SVC)(
                    str(spec.get("n", 5)).encode(), timeout=spec.get("deadline", 10)):
                out["got"] += 1 if m == b"m%d" % out["got"] else 1000
        elif spec["call"] == "cancel":
            it = ch.unary_stream("/%s/Stream" % SVC)(b"200", timeout=spec.get("deadline", 10))
            next(it)
            out["got"] = 1
            it.cancel()
            time.sleep(0.3)  # the RST_STREAM on its way before the process ends
            out["code"] = it.code().name
    except grpc.RpcError as e:
        out["code"], out["details"] = e.code().name, e.details() or ""
    out["elapsed"] = round(time.monotonic() - t0, 3)
    print(json.dumps(out), flush=True)
    ch.close()


main()
