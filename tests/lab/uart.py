#!/usr/bin/python3
"""The wire between a lab VM's serial port and its BMC, which outlives the VM.

    uart.py BMC_PORT VM_PORT

A real BMC's serial-over-LAN reads a UART that is there whether the host is powered or not. In
the lab the VM's serial port is a TCP server of its QEMU (VM_PORT), which exists only while the
VM is powered on, and ipmi_sim's SOL is a TCP client. Connected directly, every power cycle
drops ipmi_sim's connection; ipmi_sim then reconnects on a 10 s timer that an acknowledgement
from an active SOL client can cancel (lanserv/sol.c stops the same timer on an ack), after
which the SOL session stays open and silent for good. This process holds ipmi_sim's connection
(it listens on 127.0.0.1:BMC_PORT; a new connection, from a restarted ipmi_sim, replaces the
old) and connects to the VM's port whenever QEMU listens there, copying bytes both ways; bytes
with nobody at the other end are dropped, as a UART with nothing attached drops them.
"""

import asyncio
import sys

# How often the VM's port is tried while the VM is off.
RETRY_SECONDS = 0.2


class Wire:
    def __init__(self):
        self.bmc = None  # the StreamWriter towards ipmi_sim
        self.vm = None  # the StreamWriter towards QEMU

    @staticmethod
    def send(writer, data):
        if writer is not None and not writer.is_closing():
            writer.write(data)

    async def copy(self, reader, towards):
        """Copies what `reader` says to whichever end `towards()` names now, until EOF."""
        while True:
            data = await reader.read(4096)
            if not data:
                return
            self.send(towards(), data)

    async def serve_bmc(self, reader, writer):
        old, self.bmc = self.bmc, writer
        if old is not None:
            old.close()
        try:
            await self.copy(reader, lambda: self.vm)
        except ConnectionError:
            pass
        finally:
            if self.bmc is writer:
                self.bmc = None
            writer.close()

    async def follow_vm(self, port):
        while True:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(RETRY_SECONDS)
                continue
            self.vm = writer
            try:
                await self.copy(reader, lambda: self.bmc)
            except ConnectionError:
                pass
            finally:
                self.vm = None
                writer.close()
            await asyncio.sleep(RETRY_SECONDS)


async def main(bmc_port, vm_port):
    wire = Wire()
    server = await asyncio.start_server(wire.serve_bmc, "127.0.0.1", bmc_port, reuse_address=True)
    async with server:
        await asyncio.gather(server.serve_forever(), wire.follow_vm(vm_port))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
