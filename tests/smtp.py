"""A real SMTP server for the tests (aiosmtpd on 127.0.0.1): it keeps every message it
accepted, can refuse chosen addresses, and can hold a message in DATA until released (to kill
a worker mid-send)."""

from __future__ import annotations

import email
import email.policy
import socket
import threading
from email.message import Message

from aiosmtpd.controller import Controller


class Recorder:
    """aiosmtpd handler: refuse ``refused`` addresses, hold DATA while ``hold`` is set."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.refused: set[str] = set()
        self.hold = threading.Event()  # set: DATA waits for ``release``
        self.release = threading.Event()
        self.in_data = threading.Event()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refused:
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.hold.is_set():
            self.in_data.set()
            # Blocking the server's loop is what a stuck server does; released by the test.
            self.release.wait(timeout=60)
            return "451 4.3.0 took too long"
        self.messages.append(
            email.message_from_bytes(envelope.content, policy=email.policy.default)
        )
        return "250 Message accepted"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SMTPServer:
    """Start with ``start()``; ``port`` and ``recorder`` for the test; ``stop()`` at the end."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.port = free_port()
        self.controller = Controller(self.recorder, hostname="127.0.0.1", port=self.port)

    def start(self) -> SMTPServer:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.recorder.release.set()
        self.controller.stop()

    def settings(self) -> dict[str, str]:
        """Environment of a process (a worker) that should send here."""
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(self.port),
            "EMAIL_TIMEOUT": "5",
        }
