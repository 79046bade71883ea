"""A webhook receiver for bench/webhooks.sh: HTTP/1.1 with keep-alive on 127.0.0.1:PORT (asyncio, one
thread), answering every POST at once with the status last set, and counting what it received.
  webhook_receiver.py PORT
Control, by GET: /status?code=N sets the status POSTs get (default 204); /reset forgets the counts;
/stats answers {"posts", "by_status": {code: n}, "ok_ids": distinct webhook-ids answered 2xx,
"first_ok", "last_ok": the times (seconds since the epoch) of the first and last 2xx answers}.
Memory: one entry per distinct webhook-id answered 2xx since the last reset.
"""
import asyncio
import json
import sys
import time

state = {"code": 204}


def reset():
    state.update(posts=0, by_status={}, ok_ids=set(), first_ok=None, last_ok=None)


async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
            if length:
                await reader.readexactly(length)
            body, code = b"", 200
            if method == "POST":
                code = state["code"]
                state["posts"] += 1
                state["by_status"][code] = state["by_status"].get(code, 0) + 1
                if 200 <= code < 300:
                    now = time.time()
                    state["ok_ids"].add(headers.get("webhook-id"))
                    state["first_ok"] = state["first_ok"] or now
                    state["last_ok"] = now
            elif target.startswith("/status?code="):
                state["code"] = int(target.split("=", 1)[1])
            elif target == "/reset":
                reset()
            elif target == "/stats":
                body = json.dumps({"posts": state["posts"], "by_status": state["by_status"], "ok_ids": len(state["ok_ids"]),
                                   "first_ok": state["first_ok"], "last_ok": state["last_ok"]}).encode()
            writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (code, len(body), body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port):
    reset()
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


asyncio.run(main(int(sys.argv[1])))
