"""py_clients.py - Python clients meeting a fault, each with explicit
timeouts; prints "RESULT <error> <ms> [<attempts the client reports>]".

usage: py_clients.py socket|asyncio|requests|boto3|urllib3|httpx|aiohttp HOST PORT [PATH]
Connect and read timeouts are 2 s (1 s for boto3, which tries 3 times, and
for urllib3, whose Retry allows 2 retries).
"""
import asyncio
import socket
import sys
import time

MODE, HOST, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
PATH = sys.argv[4] if len(sys.argv) > 4 else "/"
URL = "http://%s:%d%s" % (HOST, PORT, PATH)
REQUEST = b"GET " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n"


def plain_socket():
    s = socket.create_connection((HOST, PORT), timeout=2)
    s.sendall(REQUEST)
    s.recv(1)


async def aio():
    r, w = await asyncio.wait_for(asyncio.open_connection(HOST, PORT), 2)
    w.write(REQUEST)
    await w.drain()
    await asyncio.wait_for(r.read(1), 2)


def with_requests():
    import requests
    requests.get(URL, timeout=(2, 2)).content


def with_boto3():
    import random
    import boto3
    from botocore.config import Config
    # botocore's standard retries wait random.random() * 2**n: the same
    # seed in the real run and under faultnet draws the same waits, so
    # that their times compare like with like.
    random.seed(20261201)
    cfg = Config(connect_timeout=1, read_timeout=1,
                 retries={"max_attempts": 3, "mode": "standard"})
    s3 = boto3.client("s3", endpoint_url="http://%s:%d" % (HOST, PORT), config=cfg,
                      region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    try:
        s3.list_buckets()
    except Exception as e:
        attempts = getattr(e, "response", {}) or {}
        raise


def with_urllib3():
    import urllib3
    from urllib3.util.retry import Retry
    http = urllib3.PoolManager(retries=Retry(total=2, connect=2, read=2, backoff_factor=0),
                               timeout=urllib3.Timeout(connect=1, read=1))
    http.request("GET", URL).data


def with_httpx():
    import httpx
    httpx.get(URL, timeout=2).read()


async def with_aiohttp():
    import aiohttp
    t = aiohttp.ClientTimeout(total=None, sock_connect=2, sock_read=2)
    async with aiohttp.ClientSession(timeout=t) as s:
        async with s.get(URL) as r:
            await r.read()


CALLS = {"socket": plain_socket, "asyncio": lambda: asyncio.run(aio()),
         "requests": with_requests, "boto3": with_boto3, "urllib3": with_urllib3,
         "httpx": with_httpx, "aiohttp": lambda: asyncio.run(with_aiohttp())}

t0 = time.monotonic()
try:
    CALLS[MODE]()
    name = "ok"
except Exception as e:  # report whatever the client raised, by its own name
    name = type(e).__name__
print("RESULT %s %d" % (name, (time.monotonic() - t0) * 1000))
