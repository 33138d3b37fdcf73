#!/usr/bin/python3
"""A TCP proxy a test controls: forwards 127.0.0.1:<free port> to a target, prints
"listening PORT" once ready, and reads commands on standard input, one per line:

  cut      closes every connection through it now (both sides), mid-stream or not
  refuse   closes new connections at once (the server looks down)
  accept   forwards new connections again
  hold     forwards nothing more, either way, on any connection (the server stops answering)
  count    prints how many connections it has forwarded so far

Each command is answered with "ok" (or the count) once done, so the test can wait for it.
"""
import asyncio
import sys

TARGET_PORT = int(sys.argv[1])
live = set()
refusing = False
holding = False
forwarded = 0


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            if holding:
                continue
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def handle(client_reader, client_writer):
    global forwarded
    if refusing:
        client_writer.transport.abort()
        return
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", TARGET_PORT)
    except OSError:
        client_writer.transport.abort()
        return
    forwarded += 1
    pair = (client_writer, server_writer)
    live.add(pair)
    try:
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
    finally:
        live.discard(pair)


async def commands():
    global refusing, holding
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = line.strip()
        if command == "cut":
            for pair in list(live):
                for writer in pair:
                    writer.transport.abort()
            live.clear()
        elif command == "refuse":
            refusing = True
        elif command == "accept":
            refusing = False
        elif command == "hold":
            holding = True
        elif command == "count":
            print(forwarded, flush=True)
            continue
        print("ok", flush=True)


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print("listening", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await commands()


asyncio.run(main())
